// pybpfprof HTML report: reads the aggregated run embedded in #pbp-data (made by
// userspace/export/html_report.cpp) and draws the summary, the timeline (d3), the flame
// graph (d3-flame-graph), the top-functions and breakdown tables and the CPU/memory charts
// (uPlot). Every view is computed from the same cells for the current scope: a time range
// (timeline brush or a drag on a chart), and a process or thread (click in a table).
// Loads nothing: works from file:// without network.
(function () {
  'use strict';

  // ---- decoding ---------------------------------------------------------------------
  function b64bytes(s) {
    const bin = atob(s || '');
    const a = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) a[i] = bin.charCodeAt(i);
    return a;
  }
  // Unsigned LEB128 varints -> Uint32Array (values fit 32 bits).
  function varints(s) {
    const b = b64bytes(s);
    const out = new Uint32Array(b.length);
    let n = 0, v = 0, mul = 1;
    for (let i = 0; i < b.length; i++) {
      const x = b[i];
      v += (x & 0x7f) * mul;
      if (x & 0x80) mul *= 128;
      else { out[n++] = v; v = 0; mul = 1; }
    }
    return out.subarray(0, n);
  }

  const D = JSON.parse(document.getElementById('pbp-data').textContent);
  const run = D.run;
  const periodS = run.period_ns / 1e9;
  // Cells, bins and trees count weight in units of run.weight_unit_ns; in an ordinary on-CPU
  // profile every sample weighs one period, so a unit is a period and counts are samples.
  const unitNs = run.weight_unit_ns || run.period_ns;
  const unitS = unitNs / 1e9;
  const runUnits = run.weight_units ?? run.samples;
  const inSamples = unitNs === run.period_ns && runUnits === run.samples;
  const ofWhat = inSamples ? 'of the samples' : 'of the time';
  const fineS = D.bins.fine_ns / 1e9;
  const nfine = D.bins.nfine;
  const K = D.bins.k;
  const ncoarse = Math.ceil(nfine / K);
  const coarseS = fineS * K;
  const fnName = D.fn.name, fnFileIdx = D.fn.file, fnLine = D.fn.line;
  const F = fnName.length;
  const fnFile = i => D.files[fnFileIdx[i]] || '';
  // --native: each function's kind (0 Python, 1 native, 2 kernel) and library; absent in a
  // profile of Python frames only.
  const fnKind = D.fn.kind || null, fnLibIdx = D.fn.lib || null;
  const fnLib = i => (fnLibIdx ? D.files[fnLibIdx[i]] || '' : '');
  const hasKind = k => !!fnKind && fnKind.some(x => x === k);

  const N = D.nodes.n;
  const nodeParent = new Int32Array(N), nodeFunc = new Int32Array(N), nodeLine = new Int32Array(N);
  {
    nodeParent[0] = -1; nodeFunc[0] = -1;
    const v = varints(D.nodes.b64);
    for (let n = 1, i = 0; n < N; n++, i += 3) {
      nodeParent[n] = n - v[i];
      nodeFunc[n] = v[i + 1];
      nodeLine[n] = v[i + 2];
    }
  }
  const stackNode = varints(D.stacks.b64);
  const S = stackNode.length;

  // Cells: [bin delta, n, (stack delta, count) x n]... -> bins with offsets into stack/count.
  function decodeCells(b64) {
    const c = varints(b64);
    const bins = [], offs = [0];
    const cs = new Uint32Array(c.length >> 1), cc = new Uint32Array(c.length >> 1);
    let nc = 0;
    for (let i = 0, b = -1; i < c.length;) {
      b += c[i++];
      const n = c[i++];
      let s = 0;
      for (let j = 0; j < n; j++) {
        s += c[i++];
        cs[nc] = s; cc[nc] = c[i++]; nc++;
      }
      bins.push(b); offs.push(nc);
    }
    return { bins: Uint32Array.from(bins), off: Uint32Array.from(offs), stack: cs.subarray(0, nc), count: cc.subarray(0, nc) };
  }

  // Run-length pairs (value, run) -> one value per fine bin (the GIL lanes: permille of the bin).
  function runs(b64) {
    const v = varints(b64), out = new Uint16Array(nfine);
    for (let i = 0, b = 0; i + 1 < v.length; i += 2) { out.fill(v[i], b, Math.min(nfine, b + v[i + 1])); b += v[i + 1]; }
    return out;
  }

  // Threads: flat list; processes refer to them by index.
  const threads = [], procs = [];
  D.procs.forEach((p, pi) => {
    const proc = { ...p, index: pi, threadIdx: [], res: p.res };
    delete proc.threads;
    for (const t of p.threads) {
      const f = varints(t.fine);
      const nf = f.length / 3;
      const fineBin = new Uint32Array(nf), fineCount = new Uint32Array(nf), fineFn = new Uint32Array(nf);
      for (let i = 0, b = -1; i < nf; i++) {
        b += f[3 * i];
        fineBin[i] = b; fineCount[i] = f[3 * i + 1]; fineFn[i] = f[3 * i + 2];
      }
      const th = {
        index: threads.length, proc: pi, tid: t.tid, ns_tid: t.ns_tid, name: t.name, n: t.n,
        fineBin, fineCount, fineFn, cells: decodeCells(t.cells), whole: t.whole ? decodeCells(t.whole) : null,
        // The samples inside each key prefix's compute spans of this thread (decoded on use).
        pcellsB64: new Map((t.pcells || []).map(([pfx, b64]) => [pfx, b64])), pcells: new Map(),
        gil: t.gil ? { held: runs(t.gil.held), waiting: runs(t.gil.waiting), held_ns: t.gil.held_ns, waiting_ns: t.gil.waiting_ns } : null,
      };
      threads.push(th);
      proc.threadIdx.push(th.index);
    }
    procs.push(proc);
  });

  // Task spans (Dask's task stream), when the run has them: lanes of compute spans, one per
  // process and thread, and the key prefixes. Times are seconds since the run's start.
  const TK = D.tasks || null;
  const prefixes = TK ? TK.prefixes : [];
  const taskKeys = TK ? TK.keys : [];
  const lanes = (TK ? TK.lanes : []).map((l, i) => {
    const v = varints(l.spans);
    const n = v.length / 4;
    const start = new Float64Array(n), stop = new Float64Array(n), prefix = new Uint32Array(n), key = new Uint32Array(n);
    for (let j = 0, t = 0; j < n; j++) {
      t += v[4 * j];
      start[j] = t / 1e6; stop[j] = (t + v[4 * j + 1]) / 1e6; prefix[j] = v[4 * j + 2]; key[j] = v[4 * j + 3];
    }
    return { index: i, proc: l.proc, tid: l.tid, thread: l.thread, name: l.name, n, start, stop, prefix, key };
  });
  function prefixCells(th, pfx) {
    if (!th.pcellsB64.has(pfx)) return null;
    let c = th.pcells.get(pfx);
    if (!c) th.pcells.set(pfx, c = decodeCells(th.pcellsB64.get(pfx)));
    return c;
  }

  // ---- formatting -------------------------------------------------------------------
  const fmtInt = d3.format(',');
  const fmtPct = v => (v >= 9.95 || v === 0 ? v.toFixed(0) : v.toFixed(1)) + '%';
  function fmtSec(s) {
    if (s >= 3600) return (s / 3600).toFixed(2) + ' h';
    if (s >= 120) return (s / 60).toFixed(1) + ' min';
    if (s >= 10) return s.toFixed(1) + ' s';
    if (s >= 1) return s.toFixed(2) + ' s';
    return (s * 1000).toFixed(s >= 0.01 ? 0 : 1) + ' ms';
  }
  const fmtBytes = b => b >= 1 << 30 ? (b / (1 << 30)).toFixed(2) + ' GiB' : (b / (1 << 20)).toFixed(1) + ' MiB';
  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    if (attrs) for (const [k, v] of Object.entries(attrs)) {
      if (k === 'class') e.className = v;
      else if (k === 'text') e.textContent = v;
      else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v);
    }
    for (const k of kids) if (k != null) e.append(k);
    return e;
  }
  // "/a/b/c/d.py" -> "…/c/d.py": tables stay narrow, the full text is in the tooltip.
  const shortPath = f => {
    const parts = f.split('/');
    return parts.length > 3 ? '…/' + parts.slice(-2).join('/') : f;
  };
  // How a process's program ended, if it did: exited, or replaced by an exec (its PID goes on
  // under the program it exec'd, which has an entry of its own).
  const endedText = p => (p.execd ? ' (exec\'d another program)' : p.exited ? ' (exited)' : '');
  const shortCmd = c => c.split(' ').map((w, i) => (i === 0 ? w.split('/').pop() : w.includes('/') ? shortPath(w) : w)).join(' ');
  // Pod and container, from the labels pybpfprof found on the node ('' when in none).
  const podOf = p => {
    const l = p.labels || {};
    return l.pod ? `${l.namespace}/${l.pod}` : (l.pod_uid || '');
  };
  const containerOf = p => {
    const l = p.labels || {};
    return l.container || (l.container_id ? l.container_id.slice(0, 12) : '');
  };
  // Then the labels a merge gave (role=scheduler, worker=...) and the machine, as
  // ProcessProfile::where() writes them in the other outputs.
  const SHOWN_ABOVE = new Set(['cgroup', 'container_id', 'container', 'pod_uid', 'pod', 'namespace', 'host']);
  const mergeLabelsOf = p => Object.entries(p.labels || {}).filter(([k]) => !SHOWN_ABOVE.has(k)).map(([k, v]) => `${k}=${v}`);
  const hostOf = p => (p.labels && p.labels.host) || '';
  const whereOf = p => [podOf(p) && 'pod ' + podOf(p), containerOf(p) && 'container ' + containerOf(p),
    ...mergeLabelsOf(p), hostOf(p) && 'host ' + hostOf(p)].filter(Boolean).join(', ');
  // A process in a few characters: its PID, and its machine in a merged profile (PIDs of
  // different machines can be equal).
  const procTag = p => hostOf(p) ? `${p.pid}@${hostOf(p)}` : String(p.pid);
  const procLabel = p => `pid ${p.pid}${p.ns_pid && p.ns_pid !== p.pid ? ' (ns ' + p.ns_pid + ')' : ''} ${p.cmdline || p.comm}` +
    (whereOf(p) ? ` [${whereOf(p)}]` : '');
  // Pods: the processes of each, in first-seen order.
  const pods = [];
  {
    const byKey = new Map();
    for (const p of procs) {
      const k = podOf(p);
      if (!k) continue;
      if (!byKey.has(k)) { byKey.set(k, pods.length); pods.push({ key: k, index: pods.length, procs: [], containers: new Set() }); }
      const pod = pods[byKey.get(k)];
      pod.procs.push(p.index);
      if (containerOf(p)) pod.containers.add(containerOf(p));
      p.pod = pod.index;
    }
  }
  const threadLabel = t => `${t.name || 'thread'} (tid ${t.tid})`;
  const fnSource = (f, line) => {
    const file = fnFile(f);
    const l = line || fnLine[f];
    return !file ? '' : l ? `${file}:${l}` : file;
  };
  // A native or kernel function: its library, then its source when known.
  const fnLocation = (f, line) => {
    const at = fnSource(f, line), lib = fnLib(f);
    return lib ? (at ? `${lib} (${at})` : lib) : at;
  };
  // The same, short, for a table cell: "libc.so.6", "_ext.so (…/ext/ext.c:7)", "…/app/main.py:12".
  const fnShortLocation = (f, line) => {
    const at = fnSource(f, line), lib = fnLib(f);
    return lib ? lib.split('/').pop() + (at ? ` (${shortPath(at)})` : '') : shortPath(at);
  };

  // ---- state ------------------------------------------------------------------------
  const state = { range: null, pod: -1, proc: -1, thread: -1, prefix: -1, search: '', inverted: false, perProcess: true, sortKey: 'self', sortDesc: true,
    hideNative: false, hideKernel: false };
  // A function hidden by "Hide native frames" / "Hide kernel frames": left out of the flame
  // graph and the top table, its time going to its nearest shown caller.
  const isHidden = f => f >= 0 && !!fnKind && ((state.hideNative && fnKind[f] === 1) || (state.hideKernel && fnKind[f] === 2));
  // The node itself, or its nearest ancestor whose function is shown (0, the root, if none).
  const shownNode = n => { while (n > 0 && isHidden(nodeFunc[n])) n = nodeParent[n]; return n; };
  let current = null;  // the last computed scope

  function scopeThreads() {
    if (state.thread >= 0) return [state.thread];
    if (state.proc >= 0) return procs[state.proc].threadIdx;
    if (state.pod >= 0) return pods[state.pod].procs.flatMap(i => procs[i].threadIdx);
    return threads.map(t => t.index);
  }

  // Sums the cells of the selected time range: per thread (all threads, for the
  // breakdown tables) and per stack (the threads in scope, for everything else).
  function compute() {
    const [b0, b1] = state.range || [0, ncoarse - 1];
    const inScope = new Uint8Array(threads.length);
    for (const t of scopeThreads()) inScope[t] = 1;
    const perThread = new Float64Array(threads.length);
    const stackCount = new Float64Array(S);
    // The leaves of each process apart (the flame graph's process level): the stacks a
    // process's threads touched, summed in stackCount and moved to leaves when the next
    // process starts (threads are in process order).
    const leaves = [];  // [node, count, process]
    const touched = [];
    let curProc = -1;
    const flush = () => {
      for (const s of touched) { leaves.push([stackNode[s], stackCount[s], curProc]); stackCount[s] = 0; }
      touched.length = 0;
    };
    for (const t of threads) {
      if (t.proc !== curProc) { flush(); curProc = t.proc; }
      // A key prefix selected: only the samples inside its compute spans. Else the whole
      // run, when embedded apart (exact where the time-scoped cells are lossy).
      const src = state.prefix >= 0 ? prefixCells(t, state.prefix) : !state.range && t.whole ? t.whole : t.cells;
      if (!src) { perThread[t.index] = 0; continue; }
      const allBins = src === t.whole || (state.prefix >= 0 && TK.whole_only);
      const bins = src.bins;
      let lo = 0, hi = allBins ? 0 : bins.length;
      while (lo < hi) { const m = (lo + hi) >> 1; if (bins[m] < b0) lo = m + 1; else hi = m; }
      let sum = 0;
      const scoped = inScope[t.index];
      for (let i = lo; i < bins.length && (allBins || bins[i] <= b1); i++) {
        for (let j = src.off[i]; j < src.off[i + 1]; j++) {
          const c = src.count[j];
          sum += c;
          if (scoped) {
            const st = src.stack[j];
            if (!stackCount[st]) touched.push(st);
            stackCount[st] += c;
          }
        }
      }
      perThread[t.index] = sum;
    }
    flush();
    let total = 0;
    for (const l of leaves) total += l[1];
    const perProc = new Float64Array(procs.length);
    for (const t of threads) perProc[t.proc] += perThread[t.index];
    let rangeTotal = 0;
    for (const v of perThread) rangeTotal += v;
    current = { b0, b1, perThread, perProc, leaves, total, rangeTotal };
    return current;
  }

  // ---- flame graph ------------------------------------------------------------------
  function newDisp(name, fid) { return { name, fid, value: 0, children: [], kids: new Map() }; }
  function childOf(d, f) {
    let c = d.kids.get(f);
    if (!c) { c = newDisp(fnName[f], f); d.kids.set(f, c); d.children.push(c); }
    return c;
  }

  // The callees view. With samples of more than one process in scope, each process is its
  // own child of the root (a process level), so one process's deep recursion cannot swallow
  // the same functions of the others.
  function calleesTree(leaves) {
    const root = newDisp('all', -1);
    const procsIn = new Set(leaves.map(l => l[2]));
    const perProc = state.perProcess && procsIn.size > 1;
    const tops = new Map();  // process -> its display node (or the root)
    const disp = new Map();  // process -> Map(call-tree node -> display node)
    const chain = [];
    for (const [n, count, pi] of leaves) {
      let top = tops.get(pi), dm = disp.get(pi);
      if (!top) {
        top = root;
        if (perProc) {
          const p = procs[pi];
          top = newDisp(`pid ${procTag(p)} ${shortCmd(p.cmdline || p.comm)}`, -1);
          top.proc = pi;
          root.children.push(top);
        }
        tops.set(pi, top);
        disp.set(pi, dm = new Map([[0, top]]));
      }
      let a = n;
      while (!dm.has(a)) { chain.push(a); a = nodeParent[a]; }
      let d = dm.get(a);
      while (chain.length) {
        const x = chain.pop();
        if (!isHidden(nodeFunc[x])) d = childOf(d, nodeFunc[x]);  // a hidden frame's callees hang from its caller
        dm.set(x, d);
      }
      d.value += count;
    }
    return root;
  }

  // Long single-child chains (a deep recursion, a tower of wrappers): a run of more than
  // CHAIN_MIN frames that each have one child and no self time is drawn as its first frame,
  // one "[N frames]" bar standing for the middle, and its last CHAIN_KEEP frames. Clicking
  // the bar expands that run (kept across re-scoping by the path of functions to it).
  const CHAIN_MIN = 12, CHAIN_KEEP = 3;
  const PER_PROCESS_MAX = 32;
  const expandedChains = new Set();
  function collapseChains(root) {
    const walk = (d, key) => {
      for (const c of d.children) {
        const ckey = key + '/' + (c.fid >= 0 ? c.fid : 'p' + (c.proc ?? c.name));
        // The run below c: its descendants down to the first frame that branches or has
        // self time (that frame included).
        const run = [];
        for (let x = c; x.children.length === 1 && x.value === 0;) { x = x.children[0]; run.push(x); }
        if (run.length <= CHAIN_MIN) { walk(c, ckey); continue; }
        const end = run[run.length - 1];
        if (expandedChains.has(ckey)) { walk(end, ckey + '/+'); continue; }
        const hidden = run.slice(0, run.length - CHAIN_KEEP);
        const names = [...new Set(hidden.map(h => h.name))];
        const bar = { name: `[${hidden.length} frames: ${names.slice(0, 3).join(', ')}${names.length > 3 ? ', …' : ''}] (click to expand)`,
          fid: -1, value: 0, children: [run[run.length - CHAIN_KEEP]],
          collapsed: { key: ckey, n: hidden.length, fids: [...new Set(hidden.map(h => h.fid))] } };
        c.children = [bar];
        walk(end, ckey + '/+');
      }
    };
    walk(root, '');
    return root;
  }

  function callersTree(leaves) {
    const root = newDisp('all', -1);
    for (const [n, count] of leaves) {
      let d = root;
      for (let a = n; a > 0; a = nodeParent[a]) if (!isHidden(nodeFunc[a])) d = childOf(d, nodeFunc[a]);
      d.value += count;
    }
    return root;
  }

  // Drops frames too small to ever be drawn on a big tree; their time stays in the parent.
  function finishTree(root, total) {
    let count = 0;
    const incl = d => {
      let v = d.value;
      for (const c of d.children) v += incl(c);
      d.total = v; count++;
      return v;
    };
    incl(root);
    // A frame narrower than ~1/4 px at a 2000 px width is never drawn unzoomed.
    const min = count > 20000 ? total / 8000 : 0;
    const walk = d => {
      delete d.kids;
      if (min) {
        const keep = [];
        for (const c of d.children) if (c.total >= min) keep.push(c); else d.value += c.total;
        d.children = keep;
      }
      for (const c of d.children) walk(c);
    };
    walk(root);
    return root;
  }

  // Off-CPU leaves (wall mode): the synthetic frames that say why a thread waited, drawn in
  // one cool colour apart from the warm palette of running code.
  const WAIT_LEAVES = new Set(['[sleeping]', '[waiting for I/O]', '[waiting for the GIL]', '[runnable, waiting for a CPU]']);
  const OFF_CPU_COLOR = '#8fb3de', OFF_CPU_HL = '#e600e6';
  const isWaitLeaf = name => WAIT_LEAVES.has(name);
  // The process level and the collapsed runs are not code: drawn in neutral colours.
  const PROC_COLOR = '#c5ccd6', COLLAPSED_COLOR = '#d8cfe8';
  // --native: native frames in aqua (flamegraph.pl's colour for C code), kernel frames in
  // green, each function its own shade; Python frames keep d3-flame-graph's warm palette
  // (which has the oranges flamegraph.pl gives the kernel, so the kernel is green here).
  const shade = (f, lo, hi) => lo + ((f * 2654435761) >>> 0) % 1000 / 1000 * (hi - lo);
  const kindColor = f => (fnKind[f] === 1 ? `hsl(185, 50%, ${shade(f, 55, 70).toFixed(1)}%)`
    : `hsl(95, 50%, ${shade(f, 48, 62).toFixed(1)}%)`);

  let chart = null;
  const flameEl = document.getElementById('flame');
  const detailsEl = document.getElementById('flame-details');
  const searchCountEl = document.getElementById('search-count');

  function flameLabel(d) {
    const total = current ? current.total : 0;
    const v = d.value;
    const f = d.data.fid;
    const loc = f >= 0 ? fnLocation(f) : '';
    return `${d.data.name}${loc ? ' — ' + loc : ''}: ${fmtSec(v * unitS)}, ${total ? fmtPct(100 * v / total) : ''}` +
      (inSamples ? ` (${fmtInt(v)} samples)` : '');
  }

  function searchMatch(d, term) {
    if (!term) return false;
    const t = term.toLowerCase();
    const match = f => fnName[f].toLowerCase().includes(t) || fnFile(f).toLowerCase().includes(t);
    // A collapsed run matches when one of the frames it stands for does.
    if (d.data.collapsed) return d.data.collapsed.fids.some(f => f >= 0 && match(f));
    const f = d.data.fid;
    return d.data.name.toLowerCase().includes(t) || (f >= 0 && match(f));
  }

  function renderFlame() {
    const t0 = performance.now();
    const data = collapseChains(finishTree(state.inverted ? callersTree(current.leaves) : calleesTree(current.leaves), current.total));
    timings.flame_tree = Math.round(performance.now() - t0);
    const width = Math.max(300, flameEl.clientWidth || 960);
    if (!chart) {
      chart = flamegraph.default()
        .width(width)
        .cellHeight(18)
        .transitionDuration(150)
        .minFrameSize(1)
        .selfValue(true)
        .inverted(true)
        .resetHeightOnZoom(true)
        .sort((a, b) => (b.value - a.value) || d3.ascending(a.data.name, b.data.name))
        .setDetailsElement(detailsEl)
        .label(flameLabel)
        .setColorMapper((d, color) => (d.highlight && (d.data.collapsed || d.data.proc !== undefined) ? OFF_CPU_HL
          : d.data.collapsed ? COLLAPSED_COLOR : d.data.proc !== undefined ? PROC_COLOR
            : isWaitLeaf(d.data.name) ? (d.highlight ? OFF_CPU_HL : OFF_CPU_COLOR)
              : !d.highlight && fnKind && d.data.fid >= 0 && fnKind[d.data.fid] ? kindColor(d.data.fid) : color))
        .setSearchMatch(searchMatch)
        .onClick(d => {
          if (!d.data.collapsed) return;
          expandedChains.add(d.data.collapsed.key);
          renderFlame();
        })
        .setSearchHandler((results, sum, total) => {
          if (!state.search) { searchCountEl.textContent = ''; return; }
          searchCountEl.textContent = `${results.length} frame${results.length === 1 ? '' : 's'} match, ` +
            `${total ? fmtPct(100 * sum / total) : '0%'} ${ofWhat}`;
        });
      d3.select(flameEl).datum(data).call(chart);
    } else {
      chart.width(width);
      chart.update(data);
    }
    if (state.search) chart.search(state.search);
    else { chart.clear(); searchCountEl.textContent = ''; }
    flameEl.classList.toggle('empty', current.total === 0);
  }

  // ---- top functions ----------------------------------------------------------------
  const topTable = document.getElementById('top-table');
  const TOP_ROWS = 200;
  function renderTop() {
    const self = new Float64Array(F), total = new Float64Array(F), stamp = new Int32Array(F).fill(-1);
    const lineSelf = new Map();  // f -> Map(line -> count)
    current.leaves.forEach(([leaf, c], i) => {
      const n = shownNode(leaf);
      const f = nodeFunc[n];
      if (f >= 0) {
        self[f] += c;
        if (nodeLine[n]) {
          let m = lineSelf.get(f);
          if (!m) lineSelf.set(f, m = new Map());
          m.set(nodeLine[n], (m.get(nodeLine[n]) || 0) + c);
        }
      }
      for (let a = n; a > 0; a = nodeParent[a]) {
        const g = nodeFunc[a];
        if (stamp[g] !== i && !isHidden(g)) { stamp[g] = i; total[g] += c; }
      }
    });
    const rows = [];
    for (let f = 0; f < F; f++) if (total[f]) {
      let line = 0, best = 0;
      const m = lineSelf.get(f);
      if (m) for (const [l, c] of m) if (c > best) { best = c; line = l; }
      rows.push({ f, name: fnName[f], loc: fnLocation(f, line), short: fnShortLocation(f, line), self: self[f], total: total[f] });
    }
    const k = state.sortKey, dir = state.sortDesc ? -1 : 1;
    rows.sort((a, b) => {
      const x = a[k], y = b[k];
      const c = typeof x === 'string' ? x.localeCompare(y) : x - y;
      return c ? c * dir : (b.self - a.self) || (b.total - a.total);
    });
    const T = current.total;
    const cols = [['name', 'Function'], ['self', 'Self'], ['total', 'Total'], ['loc', 'File:line']];
    const head = el('tr', null, ...cols.map(([key, label]) => el('th', {
      class: (key === 'self' || key === 'total' ? 'num ' : '') + (state.sortKey === key ? (state.sortDesc ? 'sorted desc' : 'sorted asc') : ''),
      'data-key': key, title: 'sort by ' + label.toLowerCase(),
      onclick: () => {
        if (state.sortKey === key) state.sortDesc = !state.sortDesc;
        else { state.sortKey = key; state.sortDesc = key === 'self' || key === 'total'; }
        renderTop();
      },
    }, label)));
    const body = el('tbody');
    for (const r of rows.slice(0, TOP_ROWS)) {
      body.append(el('tr', { 'data-fn': r.name, title: 'search for ' + r.name, onclick: () => setSearch(r.name) },
        el('td', { class: 'fn', text: r.name }),
        el('td', { class: 'num', text: `${fmtSec(r.self * unitS)} ${T ? fmtPct(100 * r.self / T) : ''}` }),
        el('td', { class: 'num', text: `${fmtSec(r.total * unitS)} ${T ? fmtPct(100 * r.total / T) : ''}` }),
        el('td', { class: 'loc', text: r.short, title: r.loc })));
    }
    if (rows.length === 0) body.append(el('tr', null, el('td', { colspan: 4, class: 'muted', text: 'No samples in this selection.' })));
    if (rows.length > TOP_ROWS) body.append(el('tr', null, el('td', { colspan: 4, class: 'muted', text: `… and ${rows.length - TOP_ROWS} more functions` })));
    topTable.replaceChildren(el('thead', null, head), body);
  }

  // ---- breakdowns -------------------------------------------------------------------
  const procTable = document.getElementById('proc-table');
  const podTable = document.getElementById('pod-table');
  document.getElementById('pod-section').hidden = pods.length === 0;
  const threadTable = document.getElementById('thread-table');

  function resourceStats(p) {
    const r = p.res;
    if (!r || !r.t.length) return { cpu: null, rss: null };
    const t0 = current.b0 * coarseS, t1 = (current.b1 + 1) * coarseS;
    let cs = 0, cn = 0, rss = 0;
    for (let i = 0; i < r.t.length; i++) {
      if (state.range && (r.t[i] < t0 || r.t[i] > t1 + 1)) continue;
      if (r.cpu[i] != null) { cs += r.cpu[i]; cn++; }
      rss = Math.max(rss, r.rss_kib[i]);
    }
    return { cpu: cn ? cs / cn : null, rss: rss ? rss * 1024 : null };
  }

  function renderBreakdowns() {
    const T = current.rangeTotal;
    if (pods.length) {
      const perPod = pods.map(pod => pod.procs.reduce((a, i) => a + current.perProc[i], 0));
      const order = pods.map(p => p.index).sort((a, b) => perPod[b] - perPod[a] || (pods[a].key < pods[b].key ? -1 : 1));
      const head = el('tr', null, el('th', { text: 'Pod' }), el('th', { text: 'Containers' }),
        el('th', { class: 'num', text: 'Processes' }), el('th', { class: 'num', text: timeHeading }), el('th', { class: 'num', text: 'Share' }));
      const body = el('tbody');
      for (const i of order) {
        const pod = pods[i];
        body.append(el('tr', {
          class: 'pod-row' + (state.pod === i ? ' selected' : ''), 'data-pod': pod.key, onclick: () => selectPod(i),
        },
          el('td', { text: pod.key }),
          el('td', { text: [...pod.containers].join(', ') }),
          el('td', { class: 'num', text: String(pod.procs.length) }),
          el('td', { class: 'num', text: fmtSec(perPod[i] * unitS) }),
          el('td', { class: 'num', text: T ? fmtPct(100 * perPod[i] / T) : '' })));
      }
      podTable.replaceChildren(el('thead', null, head), body);
    }
    const shown = state.pod >= 0 ? pods[state.pod].procs : procs.map(p => p.index);
    const order = shown.slice().sort((a, b) => current.perProc[b] - current.perProc[a] || procs[a].pid - procs[b].pid);
    const whereCol = procs.some(p => whereOf(p));
    const head = el('tr', null, el('th', { text: 'PID' }), el('th', { text: 'Command' }), el('th', { class: 'num', text: timeHeading }),
      ...(whereCol ? [el('th', { text: procs.some(p => mergeLabelsOf(p).length || hostOf(p)) ? 'Where' : 'Pod / container' })] : []),
      el('th', { class: 'num', text: 'Share' }), el('th', { class: 'num', text: 'Threads' }),
      ...(anyGil ? [el('th', { class: 'num', text: 'GIL held', title: 'the time its threads held the GIL over its wall time' })] : []),
      el('th', { class: 'num', text: 'Avg CPU' }), el('th', { class: 'num', text: 'Peak RSS' }));
    const body = el('tbody');
    for (const i of order.slice(0, 500)) {
      const p = procs[i], v = current.perProc[i], rs = resourceStats(p);
      body.append(el('tr', {
        class: 'proc-row' + (state.proc === i ? ' selected' : ''), 'data-pid': p.pid, 'data-proc': i, title: p.python ? 'CPython ' + p.python : '',
        onclick: () => selectProcess(i),
      },
        el('td', { class: 'id', text: String(p.pid) }),
        el('td', { class: 'cmd', text: shortCmd(p.cmdline || p.comm) + endedText(p), title: p.cmdline || p.comm }),
        el('td', { class: 'num', text: fmtSec(v * unitS) }),
        ...(whereCol ? [el('td', { text: whereOf(p) })] : []),
        el('td', { class: 'num', text: T ? fmtPct(100 * v / T) : '' }),
        el('td', { class: 'num', text: String(p.threadIdx.length) }),
        ...(anyGil ? [el('td', { class: 'num gil-util', 'data-pid': p.pid, text: gilText(p),
          title: p.gil ? `${fmtSec(p.gil.held_ns / 1e9)} held of ${fmtSec(p.gil.wall_ns / 1e9)}` : 'free-threaded, or its GIL is not known' })] : []),
        el('td', { class: 'num', text: rs.cpu == null ? '' : fmtPct(rs.cpu) }),
        el('td', { class: 'num', text: rs.rss == null ? '' : fmtBytes(rs.rss) })));
    }
    procTable.replaceChildren(el('thead', null, head), body);

    const list = state.proc >= 0 ? procs[state.proc].threadIdx.slice()
      : state.pod >= 0 ? pods[state.pod].procs.flatMap(i => procs[i].threadIdx) : threads.map(t => t.index);
    list.sort((a, b) => current.perThread[b] - current.perThread[a] || threads[a].tid - threads[b].tid);
    const thead = el('tr', null, el('th', { text: 'TID' }), el('th', { text: 'Name' }), el('th', { text: 'Process' }),
      el('th', { class: 'num', text: timeHeading }), el('th', { class: 'num', text: 'Share' }));
    const tbody = el('tbody');
    for (const i of list.slice(0, 300)) {
      const t = threads[i], v = current.perThread[i];
      tbody.append(el('tr', {
        class: 'thread-row' + (state.thread === i ? ' selected' : ''), 'data-tid': t.tid, onclick: () => selectThread(i),
      },
        el('td', { class: 'id', text: String(t.tid) }),
        el('td', { text: t.name || '' }),
        el('td', { class: 'cmd', text: shortCmd(procLabel(procs[t.proc])), title: procLabel(procs[t.proc]) }),
        el('td', { class: 'num', text: fmtSec(v * unitS) }),
        el('td', { class: 'num', text: T ? fmtPct(100 * v / T) : '' })));
    }
    if (list.length > 300) tbody.append(el('tr', null, el('td', { colspan: 5, class: 'muted', text: `… and ${list.length - 300} more threads` })));
    threadTable.replaceChildren(el('thead', null, thead), tbody);
    document.getElementById('thread-hint').textContent = state.proc >= 0
      ? `of pid ${procs[state.proc].pid}; click one to filter everything to it` : 'click one to filter everything to it';
  }

  // ---- timeline ---------------------------------------------------------------------
  const timelineEl = document.getElementById('timeline');
  const LABEL_W = 230;
  // Function colours: the functions that are hottest most often get a colour each.
  const hotFns = (() => {
    const c = new Map();
    for (const t of threads) for (let i = 0; i < t.fineFn.length; i++) c.set(t.fineFn[i], (c.get(t.fineFn[i]) || 0) + t.fineCount[i]);
    return [...c.entries()].sort((a, b) => b[1] - a[1]).slice(0, 10).map(e => e[0]);
  })();
  const fnColor = new Map(hotFns.map((f, i) => [f, isWaitLeaf(fnName[f]) ? OFF_CPU_COLOR : d3.schemeTableau10[i]]));
  const OTHER = '#b8b8b8';

  // Rows grouped by process, as the timeline and the GIL lanes both show them (one function
  // builds both, so a thread has the same label in each): a process row (its threads summed;
  // click the triangle to open or close the group) followed, when open, by one row per
  // thread, labelled with threadLabel (the thread's Python name, else its OS name, and its
  // tid). A process with one thread is one row. Rows keep a fixed height (labels stay
  // readable with any number of threads) and scroll in their own bounded box.
  // groups: [{ proc, threads: [thread index] }]; open: the Set of open processes.
  function groupedRows(groups, open) {
    const rows = [];
    for (const g of groups) {
      const p = procs[g.proc];
      if (g.threads.length === 1) {
        const t = threads[g.threads[0]];
        rows.push({ kind: 'thread', index: t.index, proc: p.index, threads: g.threads, depth: 0,
          label: `${procTag(p)} ${threadLabel(t)}`, title: `${threadLabel(t)} of ${procLabel(p)}` });
        continue;
      }
      const isOpen = open.has(p.index);
      rows.push({ kind: 'proc', index: p.index, proc: p.index, threads: g.threads, depth: 0, open: isOpen,
        label: `${isOpen ? '▾' : '▸'} ${procTag(p)} ${shortCmd(p.cmdline || p.comm)} · ${g.threads.length} threads`,
        title: `${procLabel(p)}: ${g.threads.length} threads (click the triangle to ${isOpen ? 'close' : 'open'} the group)` });
      if (isOpen) for (const ti of g.threads) {
        const t = threads[ti];
        rows.push({ kind: 'thread', index: t.index, proc: p.index, threads: [ti], depth: 1,
          label: threadLabel(t), title: `${threadLabel(t)} of ${procLabel(p)}` });
      }
    }
    return rows;
  }
  // Groups start open when all their rows fit a few screens; else closed.
  const ROWS_OPEN_MAX = 300;
  function initiallyOpen(groups) {
    const all = groups.reduce((a, g) => a + 1 + (g.threads.length > 1 ? g.threads.length : 0), 0);
    return new Set(all <= ROWS_OPEN_MAX ? groups.map(g => g.proc) : []);
  }
  // The label of each row, cut to fit its column (the full text is in its tooltip and data-label).
  function fitLabels(ctx, rows) {
    ctx.font = '12px system-ui, sans-serif';
    for (const r of rows) {
      const room = LABEL_W - 8 - r.depth * 14;
      let text = r.label;
      while (text.length > 4 && ctx.measureText(text).width > room) text = text.slice(0, -2);
      if (text !== r.label) text = text.slice(0, -1) + '…';
      r.text = text;
    }
  }
  // The rows' labels as SVG (crisp, findable text) in the overlay svg, rh px each: click a
  // thread to filter to it, a process row's triangle to open or close its group (toggle), the
  // rest of it to filter to the process. cls: a prefix for more classes of each row's g (gil: gil-row gil-thread).
  function drawRowLabels(svg, rows, rh, toggle, cls) {
    const lab = svg.append('g').attr('class', 'tl-labels').selectAll('g').data(rows).join('g')
      .attr('class', r => `tl-row tl-${r.kind}${r.inScope ? '' : ' out'}${cls ? ` ${cls}-row ${cls}-${r.kind}` : ''}`)
      .attr('data-kind', r => r.kind).attr('data-proc', r => r.proc)
      .attr('data-tid', r => (r.kind === 'thread' ? threads[r.index].tid : null))
      .attr('data-pid', r => procs[r.proc].pid)
      .attr('data-label', r => r.label)
      .attr('data-threads', r => (r.kind === 'proc' ? r.threads.length : null))
      .attr('data-open', r => (r.kind === 'proc' ? String(r.open) : null))
      .attr('transform', (r, i) => `translate(0,${i * rh})`);
    lab.append('rect').attr('class', 'tl-label').attr('x', 0).attr('y', 0).attr('width', LABEL_W).attr('height', rh)
      .attr('fill', 'transparent').style('cursor', 'pointer')
      .on('click', (ev, r) => {
        if (r.kind === 'thread') selectThread(r.index);
        else if (d3.pointer(ev, svg.node())[0] < 18 + r.depth * 14) toggle(r.index);
        else selectProcess(r.index);
      })
      .append('title').text(r => r.title);
    lab.append('text').attr('class', 'tl-label-text').attr('x', r => 4 + r.depth * 14).attr('y', rh / 2)
      .attr('dominant-baseline', 'central').text(r => r.text);
    return lab;
  }

  const TL_RH = 16, TL_MAX_H = 420;
  const tlGroups = procs.map(p => ({ proc: p.index, threads: p.threadIdx.filter(t => threads[t].n > 0) }))
    .filter(g => g.threads.length);
  const groupOpen = initiallyOpen(tlGroups);
  const seriesCache = new Map();  // row key -> { count, fn } per fine bin
  function rowSeries(key, tids) {
    let r = seriesCache.get(key);
    if (r) return r;
    const count = new Float32Array(nfine), fn = new Int32Array(nfine).fill(-1), best = new Float32Array(nfine);
    for (const ti of tids) {
      const t = threads[ti];
      for (let i = 0; i < t.fineBin.length; i++) {
        const b = t.fineBin[i];
        count[b] += t.fineCount[i];
        if (t.fineCount[i] > best[b]) { best[b] = t.fineCount[i]; fn[b] = t.fineFn[i]; }
      }
    }
    seriesCache.set(key, r = { count, fn });
    return r;
  }
  function timelineRows() {
    return groupedRows(tlGroups, groupOpen).map(r => Object.assign(r, rowSeries((r.kind === 'proc' ? 'p' : 't') + r.index, r.threads)));
  }
  function toggleGroup(pi) {
    if (groupOpen.has(pi)) groupOpen.delete(pi); else groupOpen.add(pi);
    renderTimeline();
  }
  const capacity = D.bins.fine_ns / unitNs;  // units in a fine bin at 100% of one CPU

  let brush = null, brushG = null, tlX = null, tlPlotW = 0;
  function renderTimeline() {
    const scrollTop = timelineEl.querySelector('.tl-scroll')?.scrollTop || 0;
    timelineEl.replaceChildren();
    const rows = timelineRows();
    if (!rows.length) { timelineEl.append(el('div', { class: 'muted', text: 'No samples.' })); return; }
    const width = Math.max(400, timelineEl.clientWidth || 1000);
    const plotW = width - LABEL_W - 16;  // room for the last tick label
    tlPlotW = plotW;
    const rh = TL_RH;
    const h = rows.length * rh;
    const axisH = 22;
    const dpr = window.devicePixelRatio || 1;
    const canvas = el('canvas', { class: 'tl-canvas' });
    canvas.width = width * dpr; canvas.height = h * dpr;
    canvas.style.width = width + 'px'; canvas.style.height = h + 'px';
    const ctx = canvas.getContext('2d');
    ctx.scale(dpr, dpr);
    const spanS = nfine * fineS;
    tlX = d3.scaleLinear().domain([0, spanS]).range([0, plotW]);
    const scoped = new Set(scopeThreads());
    const bw = Math.max(1, plotW / nfine);
    rows.forEach((r, ri) => {
      const y = ri * rh;
      r.inScope = r.threads.some(t => scoped.has(t));
      if (r.kind === 'proc') { ctx.fillStyle = '#eaeef3'; ctx.fillRect(0, y, LABEL_W + plotW, rh); }
      else if (ri % 2) { ctx.fillStyle = '#f6f6f6'; ctx.fillRect(LABEL_W, y, plotW, rh); }
      ctx.globalAlpha = r.inScope ? 1 : 0.22;
      // A process row sums its threads: its bars are scaled to its busiest bin (and at least
      // one CPU), so a process on several CPUs still shows its shape.
      if (r.cap === undefined) r.cap = r.kind === 'proc' ? Math.max(capacity, ...r.count) : capacity;
      const cap = r.cap;
      for (let b = 0; b < nfine; b++) {
        const c = r.count[b];
        if (!c) continue;
        const frac = Math.min(1, c / cap);
        const bh = Math.max(1, frac * (rh - 1));
        ctx.fillStyle = fnColor.get(r.fn[b]) || OTHER;
        ctx.fillRect(LABEL_W + tlX(b * fineS), y + rh - 1 - bh, bw, bh);
      }
      ctx.globalAlpha = 1;
    });
    fitLabels(ctx, rows);
    const scroller = el('div', { class: 'tl-scroll' });
    scroller.style.maxHeight = TL_MAX_H + 'px';
    scroller.append(canvas);
    timelineEl.append(scroller);
    const svg = d3.select(scroller).append('svg').attr('class', 'tl-overlay').attr('width', width).attr('height', h);
    drawRowLabels(svg, rows, rh, toggleGroup);
    brush = d3.brushX().extent([[0, 0], [plotW, h]]).on('end', ev => {
      if (!ev.sourceEvent) return;  // our own snap below
      if (!ev.selection) { setRange(null); return; }
      const [x0, x1] = ev.selection.map(tlX.invert);
      setRangeSeconds(x0, x1);
    });
    brushG = svg.append('g').attr('class', 'tl-brush').attr('transform', `translate(${LABEL_W},0)`).call(brush);
    brushG.on('dblclick', () => setRange(null));
    // The time axis, outside the scrolling rows so it is always in view.
    const axis = d3.select(timelineEl).append('svg').attr('class', 'tl-axis-svg').attr('width', width).attr('height', axisH);
    axis.append('g').attr('class', 'tl-axis').attr('transform', `translate(${LABEL_W},0)`)
      .call(d3.axisBottom(tlX).ticks(tlTicks(plotW)).tickFormat(v => fmtSec(v).replace(' ', '\u202f')));
    scroller.scrollTop = scrollTop;
    timelineEl.dataset.rows = String(rows.length);
    showBrush();
    const legend = document.getElementById('timeline-legend');
    // The wait leaves share one colour and one key.
    const waits = hotFns.filter(f => isWaitLeaf(fnName[f]));
    legend.replaceChildren(...hotFns.filter(f => !isWaitLeaf(fnName[f])).map(f => el('span', { class: 'key' },
      el('i', { style: `background:${fnColor.get(f)}` }), fnName[f])),
    ...(waits.length ? [el('span', { class: 'key', title: waits.map(f => fnName[f]).join(', ') }, el('i', { style: `background:${OFF_CPU_COLOR}` }), 'off CPU (waiting)')] : []),
    el('span', { class: 'key' }, el('i', { style: `background:${OTHER}` }), 'other'),
    el('span', { class: 'muted', text: ` · bin ${fmtSec(fineS)}${K > 1 ? `, selections snap to ${fmtSec(coarseS)}` : ''}` +
      (tlGroups.some(g => g.threads.length > 1) ? ' · rows grouped by process (▸/▾ opens or closes a group; a process row sums its threads)' : '') }));
  }
  // The same tick count for the timeline and the charts below it.
  const tlTicks = plotW => Math.max(2, Math.floor(plotW / 90));
  function showBrush() {
    if (!brushG) return;
    if (state.range) brushG.call(brush.move, [tlX(state.range[0] * coarseS), tlX(Math.min(nfine * fineS, (state.range[1] + 1) * coarseS))]);
    else brushG.call(brush.move, null);
  }

  // ---- tasks: lanes and key prefixes -------------------------------------------------
  const tasksSection = document.getElementById('tasks-section');
  tasksSection.hidden = !TK;
  const lanesEl = document.getElementById('task-lanes');
  const taskDetails = document.getElementById('task-details');
  const prefixTable = document.getElementById('prefix-table');
  const prefixPalette = [...d3.schemeSet2, ...d3.schemeDark2, ...d3.schemePaired];
  const prefixColor = i => (i < prefixPalette.length ? prefixPalette[i] : d3.interpolateSinebow((i * 0.618) % 1));
  const laneLabel = l => {
    const p = procs[l.proc], lb = p.labels || {};
    const who = lb.worker || (lb.role ? `${lb.role} ${p.pid}` : `pid ${p.pid}`);
    return `${who} · ${l.name || 'thread'} ${l.tid}`;
  };
  function selectPrefix(i) {
    state.prefix = state.prefix === i ? -1 : i;
    update({ timeline: true });
  }
  // The span of lane l at time t (seconds), or -1.
  function spanAt(l, t) {
    let lo = 0, hi = l.n;
    while (lo < hi) { const m = (lo + hi) >> 1; if (l.start[m] <= t) lo = m + 1; else hi = m; }
    for (let j = lo - 1; j >= 0 && j >= lo - 4; j--) if (l.start[j] <= t && t <= l.stop[j]) return j;
    return -1;
  }
  let laneGeom = null;
  function renderLanes() {
    if (!TK) return;
    const width = Math.max(400, timelineEl.clientWidth || lanesEl.clientWidth || 1000);
    const plotW = width - LABEL_W - 16;  // as the timeline: the same x for the same time
    const rh = lanes.length > 40 ? 8 : 16;
    const h = Math.max(rh, lanes.length * rh);
    const dpr = window.devicePixelRatio || 1;
    const canvas = el('canvas', { class: 'lanes-canvas' });
    canvas.width = width * dpr; canvas.height = h * dpr;
    canvas.style.width = width + 'px'; canvas.style.height = h + 'px';
    const ctx = canvas.getContext('2d');
    ctx.scale(dpr, dpr);
    const spanS = nfine * fineS;
    const x = d3.scaleLinear().domain([0, spanS]).range([0, plotW]);
    const scoped = new Set(scopeThreads());
    const anyScope = state.thread >= 0 || state.proc >= 0 || state.pod >= 0;
    let drawn = 0;
    lanes.forEach((l, li) => {
      const y = li * rh;
      const inScope = !anyScope || (l.thread >= 0 ? scoped.has(l.thread) : procs[l.proc].threadIdx.some(t => scoped.has(t)) || state.proc === l.proc);
      if (li % 2) { ctx.fillStyle = '#f6f6f6'; ctx.fillRect(LABEL_W, y, plotW, rh); }
      for (let j = 0; j < l.n; j++) {
        const dim = !inScope || (state.prefix >= 0 && l.prefix[j] !== state.prefix);
        ctx.globalAlpha = dim ? 0.18 : 1;
        ctx.fillStyle = prefixColor(l.prefix[j]);
        const x0 = x(l.start[j]), w = Math.max(1, x(l.stop[j]) - x0);
        ctx.fillRect(LABEL_W + x0, y + 1, w > 3 ? w - 1 : w, rh - 2);  // a gap between back-to-back tasks
        drawn++;
      }
      ctx.globalAlpha = 1;
      ctx.fillStyle = inScope ? '#222' : '#999';
      ctx.font = `${Math.min(12, rh - 2)}px system-ui, sans-serif`;
      ctx.textBaseline = 'middle';
      let text = laneLabel(l);
      const full = text;
      while (text.length > 4 && ctx.measureText(text).width > LABEL_W - 8) text = text.slice(0, -2);
      if (text !== full) text = text.slice(0, -1) + '…';
      ctx.fillText(text, 4, y + rh / 2);
    });
    if (state.range) {
      ctx.fillStyle = 'rgba(70,130,180,0.12)';
      const a = x(state.range[0] * coarseS), b = x(Math.min(spanS, (state.range[1] + 1) * coarseS));
      ctx.fillRect(LABEL_W + a, 0, b - a, h);
    }
    lanesEl.replaceChildren(canvas);
    lanesEl.dataset.lanes = String(lanes.length);
    lanesEl.dataset.spans = String(drawn);
    laneGeom = { x, rh, plotW };
    const legend = document.getElementById('task-legend');
    legend.replaceChildren(...prefixes.slice(0, 40).map((p, i) => el('span', {
      class: 'key' + (state.prefix === i ? ' selected' : ''), 'data-prefix': p.name, style: 'cursor:pointer',
      title: `limit the views to the samples inside the compute spans of ${p.name}`, onclick: () => selectPrefix(i),
    }, el('i', { style: `background:${prefixColor(i)}` }), p.name)),
    ...(prefixes.length > 40 ? [el('span', { class: 'muted', text: `… ${prefixes.length - 40} more prefixes in the table` })] : []),
    ...(TK.note ? [el('span', { class: 'muted', text: ' · ' + TK.note })] : []));
  }
  function laneHit(ev) {
    if (!laneGeom) return null;
    const r = lanesEl.getBoundingClientRect();
    const px = ev.clientX - r.left - LABEL_W, li = Math.floor((ev.clientY - r.top) / laneGeom.rh);
    if (px < 0 || li < 0 || li >= lanes.length) return null;
    const l = lanes[li], t = laneGeom.x.invert(px);
    // Within a pixel of a span counts as on it (short tasks are drawn 1 px wide).
    const slack = laneGeom.x.invert(1) - laneGeom.x.invert(0);
    let j = spanAt(l, t);
    if (j < 0) j = spanAt(l, t - slack);
    if (j < 0) j = spanAt(l, t + slack);
    return j < 0 ? { l } : { l, j };
  }
  lanesEl.addEventListener('mousemove', ev => {
    const hit = laneHit(ev);
    if (!hit || hit.j === undefined) { taskDetails.textContent = hit ? laneLabel(hit.l) : '\u00a0'; return; }
    const { l, j } = hit;
    const key = l.key[j] ? taskKeys[l.key[j] - 1] : prefixes[l.prefix[j]].name;
    taskDetails.textContent = `${key} — ${prefixes[l.prefix[j]].name}, compute ${fmtSec(l.stop[j] - l.start[j])} ` +
      `from ${fmtSec(l.start[j])} on ${laneLabel(l)} (click: limit the views to ${prefixes[l.prefix[j]].name})`;
  });
  lanesEl.addEventListener('click', ev => {
    const hit = laneHit(ev);
    if (hit && hit.j !== undefined) selectPrefix(hit.l.prefix[hit.j]);
  });

  // Per prefix, in the selected time range and processes/threads: tasks and compute time
  // from the spans (what Dask recorded), CPU time from the samples inside them.
  function prefixStats() {
    const t0 = state.range ? current.b0 * coarseS : -Infinity;
    const t1 = state.range ? (current.b1 + 1) * coarseS : Infinity;
    const scoped = new Set(scopeThreads());
    const anyScope = state.thread >= 0 || state.proc >= 0 || state.pod >= 0;
    const rows = prefixes.map((p, i) => ({ i, name: p.name, tasks: 0, compute: 0, cpu: 0 }));
    for (const l of lanes) {
      if (anyScope && !(l.thread >= 0 ? scoped.has(l.thread) : state.proc === l.proc)) continue;
      for (let j = 0; j < l.n; j++) {
        const a = Math.max(t0, l.start[j]), b = Math.min(t1, l.stop[j]);
        if (b < a || (b === a && l.stop[j] > l.start[j])) continue;
        rows[l.prefix[j]].tasks++;
        rows[l.prefix[j]].compute += b - a;
      }
    }
    const [b0, b1] = state.range || [0, ncoarse - 1];
    for (const t of threads) {
      if (!scoped.has(t.index)) continue;
      for (const [pfx] of t.pcellsB64) {
        const c = prefixCells(t, pfx);
        const all = !state.range || TK.whole_only;
        let sum = 0;
        for (let i = 0; i < c.bins.length; i++) {
          if (!all && (c.bins[i] < b0 || c.bins[i] > b1)) continue;
          for (let j = c.off[i]; j < c.off[i + 1]; j++) sum += c.count[j];
        }
        rows[pfx].cpu += sum;
      }
    }
    return rows;
  }
  function renderPrefixTable() {
    if (!TK) return;
    const rows = prefixStats().sort((a, b) => b.cpu - a.cpu || b.compute - a.compute || a.i - b.i);
    const head = el('tr', null, el('th', { text: 'Key prefix' }), el('th', { class: 'num', text: 'Tasks' }),
      el('th', { class: 'num', text: 'Compute (Dask)' }), el('th', { class: 'num', text: 'CPU sampled' }),
      el('th', { class: 'num', text: 'CPU / compute' }), el('th', { class: 'num', text: 'Share of CPU' }));
    const body = el('tbody');
    const T = current.rangeTotal;
    for (const r of rows) {
      const cpuS = r.cpu * unitS;
      body.append(el('tr', {
        class: 'prefix-row' + (state.prefix === r.i ? ' selected' : ''), 'data-prefix': r.name, 'data-units': String(r.cpu),
        'data-cpu-s': cpuS.toFixed(4), 'data-compute-s': r.compute.toFixed(4), 'data-tasks': String(r.tasks),
        title: `limit the flame graph, tables and totals to the samples inside the compute spans of ${r.name}`,
        onclick: () => selectPrefix(r.i),
      },
        el('td', null, el('i', { class: 'swatch', style: `background:${prefixColor(r.i)}` }), r.name),
        el('td', { class: 'num', text: fmtInt(r.tasks) }),
        el('td', { class: 'num', text: fmtSec(r.compute) }),
        el('td', { class: 'num', text: fmtSec(cpuS) }),
        el('td', { class: 'num', text: r.compute > 0 ? fmtPct(100 * cpuS / r.compute) : '' }),
        el('td', { class: 'num', text: T && state.prefix < 0 ? fmtPct(100 * r.cpu / T) : '' })));
    }
    prefixTable.replaceChildren(el('thead', null, head), body);
  }

  // ---- CPU and memory (uPlot) ---------------------------------------------------------
  const charts = [];
  const AXIS_FONT = '11px system-ui, sans-serif';  // as the timeline's axis (the last tick fits its 16 px margin)
  const resProcs = procs.filter(p => p.res && p.res.t.length);
  const palette = i => (resProcs.length <= 10 ? d3.schemeTableau10[i % 10] : d3.interpolateSinebow(i / resProcs.length));
  function renderResources() {
    for (const c of charts) c.destroy();
    charts.length = 0;
    const empty = document.getElementById('res-empty');
    if (!resProcs.length) { empty.textContent = 'No CPU/memory readings in this run.'; return; }
    empty.textContent = '';
    const cpuTables = resProcs.map(p => [p.res.t, p.res.cpu]);
    const rssTables = resProcs.map(p => [p.res.t, p.res.rss_kib.map(v => v / 1024)]);
    // The charts share the timeline's time axis: the same width, the plot area at the same
    // left and right edges (the y axis takes the labels' column), the same domain (the
    // run's span, not the readings') and the same ticks.
    const width = Math.max(400, timelineEl.clientWidth || 1000);
    const plotW = width - LABEL_W - 16;
    const spanS = nfine * fineS;
    const ticks = d3.scaleLinear().domain([0, spanS]).ticks(tlTicks(plotW));
    const make = (target, tables, title, unit, fmt) => {
      const data = uPlot.join(tables);
      const series = [{ label: 'time', value: (u, v) => (v == null ? '' : fmtSec(v)) }];
      resProcs.forEach((p, i) => series.push({
        label: `${procTag(p)} ${p.comm}`, stroke: palette(i), width: 1.5, spanGaps: true,
        show: state.proc < 0 || state.proc === p.index, value: (u, v) => (v == null ? '' : fmt(v)),
      }));
      const opts = {
        title, width, height: 200, series, padding: [8, 16, 0, 0],
        scales: { x: { time: false, range: () => [0, spanS] }, y: { range: (u, lo, hi) => [0, Math.max(hi * 1.05, unit === '%' ? 10 : 1)] } },
        axes: [{ label: 'time since start', splits: () => ticks, values: (u, vals) => vals.map(v => fmtSec(v)), font: AXIS_FONT },
          { label: unit, labelSize: 24, size: LABEL_W - 24, values: (u, vals) => vals.map(v => fmt(v)), font: AXIS_FONT }],
        legend: { show: resProcs.length <= 12 },
        cursor: { drag: { x: true, y: false, setScale: false } },
        hooks: {
          setSelect: [u => {
            if (u.select.width > 4) {
              setRangeSeconds(u.posToVal(u.select.left, 'x'), u.posToVal(u.select.left + u.select.width, 'x'));
            }
            u.setSelect({ left: 0, top: 0, width: 0, height: 0 }, false);
          }],
          draw: [u => {
            if (!state.range) return;
            const x0 = u.valToPos(state.range[0] * coarseS, 'x', true), x1 = u.valToPos((state.range[1] + 1) * coarseS, 'x', true);
            const ctx = u.ctx;
            ctx.save();
            ctx.fillStyle = 'rgba(70,130,180,0.12)';
            const l = Math.max(u.bbox.left, x0), r = Math.min(u.bbox.left + u.bbox.width, x1);
            if (r > l) ctx.fillRect(l, u.bbox.top, r - l, u.bbox.height);
            ctx.restore();
          }],
        },
      };
      const u = new uPlot(opts, data, target);
      charts.push(u);
    };
    document.getElementById('cpu-chart').replaceChildren();
    document.getElementById('rss-chart').replaceChildren();
    make(document.getElementById('cpu-chart'), cpuTables, 'CPU (100% = one core)', '%', v => v.toFixed(1) + '%');
    make(document.getElementById('rss-chart'), rssTables, 'Resident memory (RSS)', 'MiB', v => v.toFixed(1) + ' MiB');
  }
  function updateResourceScope() {
    for (const u of charts) {
      resProcs.forEach((p, i) => {
        const show = state.proc < 0 || state.proc === p.index;
        if (u.series[i + 1].show !== show) u.setSeries(i + 1, { show });
      });
      u.redraw(false);
    }
  }

  // ---- summary ------------------------------------------------------------------------
  function modeText() {
    const m = run.mode || 'cpu';
    if (m === 'wall') return `wall (on-CPU samples and off-CPU intervals; min block ${fmtSec((run.min_block_ns || 0) / 1e9)}, shorter ones counted in aggregate)`;
    if (m === 'gil') return 'gil (only the on-CPU samples that hold the GIL)';
    return 'cpu (on-CPU samples)';
  }

  // ---- GIL lanes --------------------------------------------------------------------
  // Per thread over time: the share of each timeline bin it held the GIL (top lane) and waited
  // for it (bottom lane), from the samples' GIL state. A thread whose GIL state is not known
  // (free-threaded build, or a layout pybpfprof does not know) says n/a. Rows as the
  // timeline's (groupedRows: grouped by process, collapsible, the same labels), in a box of at
  // most GIL_MAX_H (240 px, a quarter of the window on a small one) that scrolls on its own, so the flame graph below stays near the top
  // with any number of threads. Every thread is drawn (on a canvas; none is left out). A
  // process row sums its threads: held, the share of the bin its GIL was held; waiting, the
  // number of its threads waiting on average, scaled to its most (at least one thread).
  const GIL_HELD = '#2e8b57', GIL_WAIT = '#d9534f';
  const GIL_RH = 20, GIL_LH = 9, GIL_MAX_H = 'min(240px, 25vh)';
  const gilGroups = procs.map(p => ({ proc: p.index, threads: p.threadIdx.filter(t => threads[t].n > 0 || threads[t].gil) }))
    .filter(g => g.threads.length);
  const anyGil = threads.some(t => t.gil);
  const gilOpen = initiallyOpen(gilGroups);
  const gilProcCache = new Map();  // process -> { held, waiting, wmax } per fine bin (null: no thread's GIL known)
  function gilProcLanes(pi) {
    if (gilProcCache.has(pi)) return gilProcCache.get(pi);
    const known = procs[pi].threadIdx.map(i => threads[i]).filter(t => t.gil);
    let r = null;
    if (known.length) {
      const held = new Float32Array(nfine), waiting = new Float32Array(nfine);
      for (const t of known) for (let b = 0; b < nfine; b++) { held[b] += t.gil.held[b]; waiting[b] += t.gil.waiting[b]; }
      let wmax = 1000;
      for (let b = 0; b < nfine; b++) wmax = Math.max(wmax, waiting[b]);
      r = { held, waiting, wmax };
    }
    gilProcCache.set(pi, r);
    return r;
  }
  // A row's two lanes: [kind, values per fine bin (permille), full-height value, colour].
  function gilLanesOf(r) {
    if (r.kind === 'thread') {
      const g = threads[r.index].gil;
      return g ? [['held', g.held, 1000, GIL_HELD], ['waiting', g.waiting, 1000, GIL_WAIT]] : null;
    }
    const pl = gilProcLanes(r.index);
    return pl ? [['held', pl.held, 1000, GIL_HELD], ['waiting', pl.waiting, pl.wmax, GIL_WAIT]] : null;
  }
  function toggleGilGroup(pi) {
    if (gilOpen.has(pi)) gilOpen.delete(pi); else gilOpen.add(pi);
    renderGil();
  }
  let gilGeom = null;
  function renderGil() {
    const sec = document.getElementById('gil-section');
    sec.hidden = !anyGil;
    if (!anyGil) return;
    const box = document.getElementById('gil-lanes');
    const scrollTop = box.querySelector('.gil-scroll')?.scrollTop || 0;
    const width = Math.max(400, timelineEl.clientWidth || box.clientWidth || 1000);
    const plotW = width - LABEL_W - 16;  // as the timeline: the same x for the same time
    const rows = groupedRows(gilGroups, gilOpen);
    const rh = GIL_RH, lh = GIL_LH;
    const h = Math.max(rh, rows.length * rh);
    const x = d3.scaleLinear().domain([0, nfine * fineS]).range([0, plotW]);
    const scoped = new Set(scopeThreads());
    // (A canvas side is at most 32767 px: a very tall one is drawn at a lower resolution.)
    const dpr = Math.min(window.devicePixelRatio || 1, 32000 / h);
    const canvas = el('canvas', { class: 'gil-canvas' });
    canvas.width = Math.round(width * dpr); canvas.height = Math.round(h * dpr);
    canvas.style.width = width + 'px'; canvas.style.height = h + 'px';
    const ctx = canvas.getContext('2d');
    ctx.scale(dpr, dpr);
    const drawn = [];  // per row: its lanes' drawn bins and seconds
    rows.forEach((r, ri) => {
      const y = ri * rh;
      r.inScope = r.threads.some(t => scoped.has(t));
      if (r.kind === 'proc') { ctx.fillStyle = '#eaeef3'; ctx.fillRect(0, y, LABEL_W + plotW, rh); }
      const ls = gilLanesOf(r);
      r.lanes = ls;
      if (!ls) { drawn.push(null); return; }
      ctx.globalAlpha = r.inScope ? 1 : 0.3;
      const out = [];
      ls.forEach(([kind, lane, full, color], li) => {
        const top = y + 1 + li * (lh + 1);
        ctx.fillStyle = r.kind === 'proc' ? '#dde3ea' : '#f3f3f3';
        ctx.fillRect(LABEL_W, top, plotW, lh);
        ctx.fillStyle = color;
        let bins = 0, runs = 0, seconds = 0;
        for (let b = 0; b < nfine;) {
          let e = b + 1;
          while (e < nfine && lane[e] === lane[b]) e++;
          if (lane[b]) {
            const bh = Math.max(1, lh * Math.min(1, lane[b] / full));
            const x0 = x(b * fineS);
            ctx.fillRect(LABEL_W + x0, top + lh - bh, Math.max(1, x(e * fineS) - x0), bh);
            bins += e - b; runs++;
            seconds += lane[b] / 1000 * (e - b) * fineS;
          }
          b = e;
        }
        out.push({ kind, top: top - y, bins, runs, seconds });
      });
      ctx.globalAlpha = 1;
      drawn.push(out);
    });
    fitLabels(ctx, rows);
    const scroller = el('div', { class: 'gil-scroll' });
    scroller.style.maxHeight = GIL_MAX_H;
    scroller.append(canvas);
    const svg = d3.select(scroller).append('svg').attr('class', 'gil-svg gil-overlay').attr('width', width).attr('height', h);
    const lab = drawRowLabels(svg, rows, rh, toggleGilGroup, 'gil');
    // Per lane (for tests and tooltips): what was drawn of it; n/a where the GIL is not known.
    lab.each(function (r, ri) {
      const g = d3.select(this);
      if (!r.lanes) {
        g.append('text').attr('class', 'gil-na').attr('x', LABEL_W + 4).attr('y', rh / 2).attr('dominant-baseline', 'central')
          .text('GIL n/a (free-threaded, or its GIL is not known)');
        return;
      }
      const t = r.kind === 'thread' ? threads[r.index] : null;
      for (const d of drawn[ri]) {
        const lg = g.append('g').attr('class', r.kind === 'thread' ? 'gil-lane' : 'gil-proc-lane').attr('data-kind', d.kind)
          .attr('data-bins', d.bins).attr('data-runs', d.runs).attr('data-seconds', d.seconds.toFixed(6));
        if (t) lg.attr('data-tid', t.tid).attr('data-ns', d.kind === 'held' ? t.gil.held_ns : t.gil.waiting_ns);
        lg.append('rect').attr('class', 'gil-lane-box').attr('x', LABEL_W).attr('y', d.top).attr('width', plotW).attr('height', lh)
          .attr('fill', 'transparent');
      }
    });
    const axis = d3.create('svg').attr('class', 'tl-axis-svg').attr('width', width).attr('height', 22);
    axis.append('g').attr('class', 'tl-axis').attr('transform', `translate(${LABEL_W},0)`)
      .call(d3.axisBottom(x).ticks(tlTicks(plotW)).tickFormat(v => fmtSec(v).replace(' ', '\u202f')));
    box.replaceChildren(scroller, axis.node());
    scroller.scrollTop = scrollTop;
    gilGeom = { rows, x, plotW, scroller };
    const threadRows = rows.filter(r => r.kind === 'thread').length;
    const gilThreadCount = gilGroups.reduce((a, g) => a + g.threads.length, 0);
    box.dataset.rows = String(rows.length);
    box.dataset.threads = String(threadRows);
    box.dataset.groups = String(rows.filter(r => r.kind === 'proc').length);
    const closed = gilThreadCount - threadRows;
    document.getElementById('gil-legend').replaceChildren(
      el('span', { class: 'key' }, el('i', { style: `background:${GIL_HELD}` }), 'holds the GIL'),
      el('span', { class: 'key' }, el('i', { style: `background:${GIL_WAIT}` }), 'waits for the GIL'),
      el('span', { class: 'muted', text: ` · share of each ${fmtSec(fineS)} bin` +
        (gilGroups.some(g => g.threads.length > 1) ? ' · ▸/▾ opens or closes a process; its row: the GIL held, threads waiting' : '') +
        (closed ? ` · ${fmtInt(closed)} of ${fmtInt(gilThreadCount)} threads in closed groups` : '') }));
  }
  // Hover: which lane, bin and share.
  {
    const box = document.getElementById('gil-lanes');
    const details = document.getElementById('gil-details');
    box.addEventListener('mousemove', ev => {
      if (!gilGeom || !details) return;
      const c = gilGeom.scroller.querySelector('canvas').getBoundingClientRect();
      const px = ev.clientX - c.left - LABEL_W, py = ev.clientY - c.top;
      const r = gilGeom.rows[Math.floor(py / GIL_RH)];
      if (!r || px < 0 || px > gilGeom.plotW) { details.textContent = r ? r.title : '\u00a0'; return; }
      const who = r.kind === 'thread' ? `${threadLabel(threads[r.index])} of pid ${procTag(procs[r.proc])}` : `pid ${procTag(procs[r.proc])} (${r.threads.length} threads)`;
      if (!r.lanes) { details.textContent = `${who}: GIL n/a`; return; }
      const b = Math.min(nfine - 1, Math.max(0, Math.floor(gilGeom.x.invert(px) / fineS)));
      const [, held] = r.lanes[0], [, waiting] = r.lanes[1];
      const when = `${fmtSec(b * fineS)}–${fmtSec((b + 1) * fineS)}`;
      details.textContent = r.kind === 'thread'
        ? `${who}, ${when}: holds the GIL ${fmtPct(held[b] / 10)}, waits for it ${fmtPct(waiting[b] / 10)}`
        : `${who}, ${when}: its GIL held ${fmtPct(Math.min(1000, held[b]) / 10)}, ${(waiting[b] / 1000).toFixed(1)} threads waiting for it on average`;
    });
    box.addEventListener('mouseleave', () => { if (details) details.textContent = '\u00a0'; });
  }
  // With off-CPU intervals (wall mode) the tables' times are wall time, not CPU time.
  const timeHeading = run.mode === 'wall' || run.off_cpu_ns ? 'Time' : 'CPU time';
  const gilText = p => p.gil ? fmtPct(100 * p.gil.share) : 'n/a';

  function renderSummary() {
    const titleEl = document.getElementById('title-target');
    titleEl.textContent = run.target || '';
    titleEl.title = run.target || '';  // (the heading is cut to one line)
    const start = new Date(run.start_unix_ms);
    const unresolved = Object.entries(run.unresolved || {});
    const items = [
      ['Target', run.target || '—'],
      ['Started', `${start.toLocaleString()} (${run.start_iso})`],
      ['Duration', fmtSec(run.duration_s)],
      ['Mode', modeText()],
      ['On/off CPU', `${fmtSec(run.cpu_ns / 1e9)} on CPU, ${run.mode === 'wall' || run.off_cpu_ns ? fmtSec(run.off_cpu_ns / 1e9) + ' off CPU' : 'off CPU not sampled (cpu mode)'}`],
      ['Rate', `${run.rate_hz} Hz per CPU (${fmtSec(periodS)} per sample)`],
      ['Samples', `${fmtInt(run.samples)} (${fmtSec(inSamples ? run.samples * periodS : run.cpu_ns / 1e9)} of CPU` +
        (run.off_cpu_ns ? `, ${fmtSec(run.off_cpu_ns / 1e9)} off CPU)` : ')')],
      ['Lost', fmtInt(run.lost)],
      ['Unresolved', unresolved.length ? `${fmtInt(run.unresolved_total)}: ` + unresolved.map(([k, v]) => `${fmtInt(v)} ${k}`).join(', ') : '0'],
      ['Processes', `${run.active_processes} with samples, ${run.processes} profiled`],
      ['Threads', fmtInt(run.threads)],
      ['Kernel', run.kernel || '—'],
      ['pybpfprof', run.version],
      ...(run.host ? [['Host', run.host]] : []),
      ...(run.merged_from && run.merged_from.length ? [['Merged', `${run.merged_from.length} profiles, lined up by their wall-clock start times`]] : []),
    ];
    document.getElementById('summary').replaceChildren(...items.map(([k, v]) =>
      el('div', { class: 'item', 'data-key': k.toLowerCase() }, el('span', { class: 'k', text: k }), el('span', { class: 'v', text: v, title: v }))));
    const notes = [];
    if (run.truncated) notes.push(`${fmtInt(run.truncated)} samples were deeper than ${run.max_depth} frames: their innermost ${run.max_depth} frames are kept, under a [truncated] frame where the outer ones were.`);
    if (run.lost) notes.push(`${fmtInt(run.lost)} samples were lost (ring buffer full).`);
    const lossy = D.bins.lossy;
    const amount = n => inSamples ? `${fmtInt(n)} samples` : fmtSec(n * unitS);
    if (lossy) notes.push(`To keep this file small, for a selected time range the stacks ` +
      (inSamples ? `seen fewer than ${fmtInt(lossy.min_count)} times` : `weighing less than ${amount(lossy.min_count)}`) +
      ` in a thread and ${fmtSec(coarseS)} interval are merged into "[rare stacks]" ` +
      `under their nearest caller with at least ${amount(lossy.hot)} in the run ` +
      `(${fmtPct(100 * lossy.merged / Math.max(1, runUnits))} ${ofWhat}). Totals are exact` +
      (lossy.whole ? '; the whole run (no range selected) is exact.' : '.'));
    document.getElementById('notes').replaceChildren(...notes.map(n => el('div', { text: n })));

    // A merged run: each input's own run, where it was taken and what it was labelled.
    const merged = (run.merged_from || []).map((m, i) => [`profile ${i + 1}`,
      [Object.entries(m.labels || {}).map(([k, v]) => `${k}=${v}`).join(', '), m.host && `host ${m.host}`,
        `${m.target || '—'}`, `started ${m.start_iso}`, `${fmtSec(m.duration_s)}`, `${m.rate_hz} Hz`,
        m.kernel && `kernel ${m.kernel}`, m.lost ? `${fmtInt(m.lost)} lost` : ''].filter(Boolean).join(' · ')]);
    const kv = [
      ['Command', (run.command || []).join(' ') || '—'],
      ...merged.slice(0, 200),
      ...procs.map(p => [`pid ${p.pid}`, `${p.cmdline || p.comm}${p.python ? ' — CPython ' + p.python : ''}${endedText(p)}` +
        (Object.keys(p.labels || {}).length ? ' [' + Object.entries(p.labels).map(([k, v]) => `${k}=${v}`).join(', ') + ']' : '')]).slice(0, 200),
      ['Max stack depth', String(run.max_depth || '—')],
      ['BPF cost', run.bpf_ns_per_event ? `${run.bpf_ns_per_event} ns per perf event` : '—'],
      ['Report data', `${fmtInt(S)} distinct stacks, ${fmtInt(D.bins.cells)} cells, timeline bins of ${fmtSec(fineS)}` +
        (K > 1 ? `, selections in steps of ${fmtSec(coarseS)}` : '')],
    ];
    document.getElementById('run-table').replaceChildren(...kv.map(([k, v]) => el('tr', null, el('th', { text: k }), el('td', { text: v }))));
  }

  function renderScope() {
    const c = current;
    const r = document.getElementById('scope-range');
    const spanS = nfine * fineS;
    if (state.range) {
      const t0 = c.b0 * coarseS, t1 = Math.min(spanS, (c.b1 + 1) * coarseS);
      r.textContent = `${fmtSec(t0)} – ${fmtSec(t1)}`;
      r.classList.add('active');
    } else {
      r.textContent = `whole run (${fmtSec(run.duration_s)})`;
      r.classList.remove('active');
    }
    const p = document.getElementById('scope-proc');
    if (state.thread >= 0) {
      const t = threads[state.thread];
      p.textContent = `pid ${procs[t.proc].pid}${hostOf(procs[t.proc]) ? ' on ' + hostOf(procs[t.proc]) : ''} · ${threadLabel(t)}`;
    } else if (state.proc >= 0) p.textContent = procLabel(procs[state.proc]);
    else if (state.pod >= 0) p.textContent = `pod ${pods[state.pod].key}`;
    else p.textContent = 'all processes';
    p.classList.toggle('active', state.thread >= 0 || state.proc >= 0 || state.pod >= 0);
    const px = document.getElementById('scope-prefix');
    px.hidden = state.prefix < 0;
    px.textContent = state.prefix >= 0 ? `tasks ${prefixes[state.prefix].name}` : '';
    px.classList.toggle('active', state.prefix >= 0);
    const tot = document.getElementById('scope-totals');
    tot.textContent = (inSamples ? `${fmtInt(c.total)} samples · ${fmtSec(c.total * unitS)} CPU` : fmtSec(c.total * unitS)) +
      (runUnits ? ` · ${fmtPct(100 * c.total / runUnits)} of the run` : '');
    tot.dataset.samples = String(c.total);
  }

  // ---- actions ----------------------------------------------------------------------
  const timings = {};  // ms of the last update, per step (window.pbpReport.timings)
  function timed(name, f) {
    const t = performance.now();
    f();
    timings[name] = Math.round(performance.now() - t);
  }
  function update(opts = {}) {
    timed('compute', compute);
    renderScope();
    timed('flame', renderFlame);
    timed('top', renderTop);
    timed('breakdowns', renderBreakdowns);
    timed('timeline', () => { if (opts.timeline) renderTimeline(); else if (opts.brush) showBrush(); });
    timed('gil', () => { if (opts.timeline) renderGil(); });
    timed('resources', updateResourceScope);
    timed('tasks', () => { renderLanes(); renderPrefixTable(); });
  }
  function setRange(r) {
    state.range = r && !(r[0] <= 0 && r[1] >= ncoarse - 1) ? r : null;
    update({ brush: true });
  }
  function setRangeSeconds(t0, t1) {
    if (!(t1 > t0)) return setRange(null);
    const b0 = Math.max(0, Math.floor(t0 / coarseS + 1e-9));
    const b1 = Math.min(ncoarse - 1, Math.max(b0, Math.ceil(t1 / coarseS - 1e-9) - 1));
    setRange([b0, b1]);
  }
  function selectPod(i) {
    state.pod = state.pod === i && state.proc < 0 && state.thread < 0 ? -1 : i;
    state.proc = -1;
    state.thread = -1;
    update({ timeline: true });
  }
  function selectProcess(i) {
    if (state.proc === i && state.thread < 0) state.proc = -1;
    else state.proc = i;
    state.thread = -1;
    update({ timeline: true });
  }
  function selectThread(i) {
    if (state.thread === i) state.thread = -1;
    else { state.thread = i; state.proc = threads[i].proc; }
    update({ timeline: true });
  }
  const searchEl = document.getElementById('search');
  function setSearch(term) {
    searchEl.value = term;
    state.search = term;
    if (chart) {
      if (term) chart.search(term); else { chart.clear(); searchCountEl.textContent = ''; }
    }
  }
  searchEl.addEventListener('input', () => setSearch(searchEl.value.trim()));
  document.getElementById('inverted').addEventListener('change', e => { state.inverted = e.target.checked; renderFlame(); });
  // The process level: on by default for a few processes; with many (a fleet of identical
  // workers) one merged tree is the readable default, and the box turns it on.
  {
    const box = document.getElementById('per-process');
    const withSamples = procs.filter(p => p.threadIdx.some(t => threads[t].n > 0)).length;
    state.perProcess = withSamples <= PER_PROCESS_MAX;
    box.checked = state.perProcess;
    box.parentElement.hidden = withSamples < 2;
    box.addEventListener('change', e => { state.perProcess = e.target.checked; renderFlame(); });
  }
  // Hide native / kernel frames: offered when the profile has them.
  for (const [kind, id, key] of [[1, 'hide-native', 'hideNative'], [2, 'hide-kernel', 'hideKernel']]) {
    const box = document.getElementById(id);
    box.parentElement.hidden = !hasKind(kind);
    box.addEventListener('change', e => { state[key] = e.target.checked; renderFlame(); renderTop(); });
  }
  document.getElementById('kind-legend').hidden = !hasKind(1) && !hasKind(2);
  document.getElementById('reset-zoom').addEventListener('click', () => chart && chart.resetZoom());
  document.getElementById('reset-all').addEventListener('click', () => {
    state.range = null; state.pod = -1; state.proc = -1; state.thread = -1; state.prefix = -1;
    update({ timeline: true });
  });

  // Raw data: the speedscope JSON of the same run, gzipped in the page; unpacked on click.
  const rawEl = document.getElementById('pbp-raw');
  const dl = document.getElementById('raw-download');
  const rawName = `pybpfprof-${(run.target || 'run').replace(/[^A-Za-z0-9_.-]+/g, '_').slice(0, 40)}-${run.start_iso.replace(/[:.]/g, '-')}.speedscope.json`;
  async function rawText() {
    if (!rawEl) throw new Error('no embedded speedscope data');
    const stream = new Blob([b64bytes(rawEl.textContent.trim())]).stream().pipeThrough(new DecompressionStream('gzip'));
    return new Response(stream).text();
  }
  if (rawEl) {
    dl.setAttribute('download', rawName);
    let ready = false;
    dl.addEventListener('click', async e => {
      if (ready) return;
      e.preventDefault();
      const text = await rawText();
      dl.href = URL.createObjectURL(new Blob([text], { type: 'application/json' }));
      ready = true;
      dl.click();
    });
  } else {
    const missing = document.getElementById('pbp-raw-missing');
    dl.classList.add('disabled');
    dl.removeAttribute('href');
    dl.title = missing ? JSON.parse(missing.textContent) : 'not embedded';
    dl.textContent = 'speedscope JSON not embedded';
  }

  // ---- start --------------------------------------------------------------------------
  renderSummary();
  update({ timeline: true });
  renderResources();
  let resizeTimer = 0, lastWidth = window.innerWidth;
  window.addEventListener('resize', () => {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(() => {
      if (window.innerWidth === lastWidth) return;
      lastWidth = window.innerWidth;
      renderTimeline();
      renderFlame();
      renderResources();
      renderLanes();
      renderGil();
    }, 150);
  });

  // For tests and for the curious (read-only use).
  window.pbpReport = {
    data: D, state, procs, threads, timings, lanes, prefixes,
    totals: () => ({ samples: current.total, rangeSamples: current.rangeTotal }),
    // The time axes (for tests): the timeline's domain and the charts' x scales.
    timelineDomain: () => (tlX ? tlX.domain() : null),
    chartScales: () => charts.map(u => ({ title: u.root.querySelector('.u-title')?.textContent || '', min: u.scales.x.min, max: u.scales.x.max })),
    rawText,
    ready: true,
  };
})();
