#!/usr/bin/env node
// Checks pybpfprof's HTML report in its real consumer, a browser (headless Chromium via
// playwright-core), offline, the way a person uses it:
//   - it loads from file:// with no page error, no console error and no request other than
//     file: or data: (anything else is blocked and fails the check);
//   - the run summary is filled in;
//   - the flame graph shows the expected function names as visible labels; clicking one
//     zooms it to the full width; the inverted (callers) view puts the hottest function at
//     the first level;
//   - typing in the search box highlights matching frames (and only those);
//   - clicking a process row changes the top-functions table (and clicking it again
//     restores it); clicking a thread row scopes to that thread;
//   - dragging a range on the timeline changes the totals (and Reset restores them);
//   - the CPU/memory charts are drawn when the run has readings;
//   - the embedded speedscope JSON unpacks and holds every sample;
//   - with task spans (a Dask run): the task lanes are drawn (one per worker thread, every
//     lane with coloured spans), and clicking a key prefix scopes the totals to the samples
//     inside its compute spans (they become the prefix's CPU in the prefix table, the top
//     table changes, the scope bar names it) and clicking it again restores them;
//   - with GIL states (expect.gil): the GIL lanes are drawn per thread, their bins add up to
//     the time held / waited, unknown threads say n/a, and the process table has the GIL
//     utilisation; the rows are grouped by process as the timeline's (a group closes and
//     opens), each thread labelled as the timeline labels it, in a bounded box of their own.
//
// Usage: node check_report.mjs [--screenshot FILE] [--timeout-ms N] REPORT.html [EXPECT.json]
//   EXPECT: {"functions": [names that must be visible], "search": "term",
//            "min_processes": N, "resources": true|false, "raw": true|false,
//            "buckets": true (a run longer than its sample window: the raw data's entries stand
//                       for more samples; its metadata's total_samples must still match),
//            "pods": N (pod rows), "pod_processes": {"ns/name": N},
//            "proc_text": [texts the process table must show, e.g. "host node-a"],
//            "max_ready_ms": N, "max_update_ms": N,
//            "task_lanes": N (lanes drawn), "scope_prefix": "prefix" (click it in the prefix table),
//            "prefixes": ["prefix", ...] (rows the prefix table must have),
//            "gil": {"lanes": N (GIL lanes drawn, two per thread with a known GIL state),
//                    "held_s": {"tid": seconds}, "waiting_s": {"tid": seconds} (what each lane's
//                    drawn bins add up to, ±10 ms), "na": [tids that must say n/a],
//                    "util": {"pid": "80%" or "n/a"} (the process table), "mode": "wall",
//                    "groups": N (process rows), "threads": N (thread rows and threads in closed
//                    groups), "thread_names": {"tid": "name"}, "scrolls": true (the rows scroll in
//                    their own box), "max_box_h": px and "flame_within_screens": k (at 1400x1000
//                    and 1000x800: the GIL box at most px high, the flame graph's section
//                    starting within k window heights)},
//            "layout": {"dir": screenshots dir, "min_columns": N} (every table column in view at
//                       1400x1000 and 1000x800, nothing scrolls sideways, the title within the
//                       width with its full text in its tooltip),
//            "flame_bounded": {"max_height": px, "collapsed_at_least": N} (the box is bounded, the
//                       tables start within a screen, a collapsed run of >= N frames expands),
//            "timeline": {"min_rows": N, "groups": N, "thread_names": {"tid": "name"}},
//            "process_level": {"pid": units} (the flame graph's first level, one node per process),
//            "kinds": {"native": [names], "kernel": [names], "python": [names] (drawn in their kind's
//                      colour), "hide_native"/"hide_kernel"/"hide_both": {"name": self units}
//                      (with those frames hidden), "top_loc": {"name": "File:line text"}}}
//   With CPU/memory readings it always checks that the charts' x scales equal the timeline's
//   domain and their plot areas' left/right edges are within 2 px of the timeline's.
// Prints "ok FILE: ..." or "FAIL FILE: ..."; exits 1 on failure, 2 on usage/environment errors.
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const CHROMIUM = process.env.PBP_CHROMIUM || '/usr/bin/chromium';

function usage(msg) {
  if (msg) console.error(`check_report: ${msg}`);
  console.error('usage: node check_report.mjs [--screenshot FILE] [--timeout-ms N] REPORT.html [EXPECT.json]');
  process.exit(2);
}

let screenshot = null, timeoutMs = 60000;
const pos = [];
for (let i = 2; i < process.argv.length; i++) {
  const a = process.argv[i];
  if (a === '--screenshot') screenshot = process.argv[++i];
  else if (a === '--timeout-ms') timeoutMs = Number(process.argv[++i]);
  else if (a === '-h' || a === '--help') usage();
  else if (a.startsWith('--')) usage(`unknown option ${a}`);
  else pos.push(a);
}
if (pos.length < 1 || pos.length > 2) usage('give one report and optionally one expectations file');
const file = path.resolve(pos[0]);
if (!fs.existsSync(file)) usage(`${file} does not exist`);
let expect = {};
if (pos[1]) {
  try { expect = JSON.parse(fs.readFileSync(pos[1], 'utf8')); } catch (e) { usage(`bad expectations ${pos[1]}: ${e.message}`); }
}
if (!fs.existsSync(CHROMIUM)) usage(`${CHROMIUM} not found: apt-get install -y chromium`);
let chromium;
try {
  ({ chromium } = require('playwright-core'));
} catch (e) {
  usage(`missing node modules (${e.message}): run "npm ci" in ${path.dirname(new URL(import.meta.url).pathname)}`);
}

const failures = [];
const info = [];
const fail = m => failures.push(m);

let browser;
try {
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync'],
  });
} catch (e) {
  console.error(`check_report: cannot start ${CHROMIUM}: ${e.message}`);
  process.exit(2);
}
const context = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
// Anything that is not file: or data: is blocked and fails the check.
await context.route('**/*', route => {
  const u = route.request().url();
  if (/^(file|data):/.test(u)) return route.continue();
  fail(`network request: ${u}`);
  return route.abort();
});
const page = await context.newPage();
page.on('console', msg => { if (msg.type() === 'error') fail(`console error: ${msg.text().split('\n')[0]}`); });
page.on('pageerror', err => fail(`page error: ${String(err.message).split('\n')[0]}`));
page.on('request', req => { const u = req.url(); if (!/^(file|data):/.test(u)) fail(`request: ${u}`); });
page.on('dialog', d => { fail(`dialog: ${d.message()}`); d.dismiss().catch(() => {}); });

const sleep = ms => new Promise(r => setTimeout(r, ms));
// Polls fn (in node) until it returns a truthy value or the time is up.
// A table row's click: the row is brought to the middle of the viewport first, clear of the
// sticky scope bar at the top (Playwright's own scrolling may leave it under the bar, which then
// takes the click: once seen as a 30 s timeout in CI), and a click that still cannot happen is a
// failure naming the row, not a timeout of the whole check.
async function clickRow(loc, what) {
  try {
    await loc.evaluate(el => el.scrollIntoView({ block: 'center' }));
    await loc.click({ timeout: 10000 });
    return true;
  } catch (e) {
    fail(`clicking ${what}: ${String(e.message).split('\n')[0]}`);
    return false;
  }
}

async function until(fn, ms = 10000, step = 50) {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) return v;
    await sleep(step);
  }
}

// Visible flame-graph labels: the text of frames wide enough to show one.
const visibleLabels = () => page.evaluate(() => [...document.querySelectorAll('#flame svg g.frame')]
  .filter(g => { const d = g.querySelector('div'); return d && d.style.display !== 'none' && d.textContent; })
  .map(g => g.querySelector('div').textContent));
// (A collapsed run is highlighted when a frame it stands for matches: it is named by those.)
const highlighted = () => page.evaluate(() => [...document.querySelectorAll('#flame svg g.frame')]
  .filter(g => (g.querySelector('rect').getAttribute('fill') || '').toLowerCase() === '#e600e6')
  .map(g => {
    const c = g.__data__ && g.__data__.data.collapsed;
    return c ? c.fids.map(f => window.pbpReport.data.fn.name[f]).join(' | ') : g.getAttribute('name');
  }));
const totals = () => page.evaluate(() => Number(document.getElementById('scope-totals').dataset.samples));
const topText = () => page.evaluate(() => document.querySelector('#top-table tbody').innerText);

async function main() {
  const t0 = Date.now();
  await page.goto('file://' + file, { waitUntil: 'load', timeout: timeoutMs });
  // Ready, or failed already (a page error stops the report's script).
  const ready = () => page.evaluate(() => !!(window.pbpReport && window.pbpReport.ready));
  const ok = await until(async () => failures.length > 0 || await ready(), timeoutMs, 50);
  const readyMs = Date.now() - t0;
  if (!ok || !(await ready())) { fail('the report never became ready (window.pbpReport.ready)'); return; }
  info.push(`ready in ${readyMs} ms`);
  if (expect.max_ready_ms && readyMs > expect.max_ready_ms) fail(`ready after ${readyMs} ms > ${expect.max_ready_ms} ms`);
  if (failures.length) return;

  const run = await page.evaluate(() => window.pbpReport.data.run);
  // Summary.
  const summary = await page.evaluate(() => Object.fromEntries([...document.querySelectorAll('#summary .item')]
    .map(i => [i.dataset.key, i.querySelector('.v').textContent])));
  for (const k of ['target', 'started', 'duration', 'rate', 'samples', 'lost', 'unresolved', 'processes', 'threads', 'kernel', 'pybpfprof'])
    if (!summary[k]) fail(`summary lacks ${k}`);
  if (summary.samples && !summary.samples.replace(/,/g, '').includes(String(run.samples))) fail(`summary samples ${summary.samples} != ${run.samples}`);

  // Flame graph: the expected functions are visible.
  const want = expect.functions || [];
  let labels = await until(async () => { const l = await visibleLabels(); return want.every(f => l.includes(f)) && l; }, 10000);
  if (!labels) {
    labels = await visibleLabels();
    fail(`flame graph does not show ${JSON.stringify(want.filter(f => !labels.includes(f)))} (visible: ${JSON.stringify(labels.slice(0, 15))})`);
  }
  info.push(`${labels.length} visible frames`);

  // Click to zoom: the clicked frame takes the full width.
  if (want.length) {
    const name = want[0];
    const before = await page.evaluate(n => {
      const g = [...document.querySelectorAll('#flame svg g.frame')].find(x => x.getAttribute('name') === n);
      return g ? Number(g.querySelector('rect').getAttribute('width')) : 0;
    }, name);
    await page.locator(`#flame svg g.frame[name="${name.replace(/"/g, '\\"')}"]`).first().click({ force: true });
    const zoomed = await until(() => page.evaluate(n => {
      const svg = document.querySelector('#flame svg');
      const g = [...svg.querySelectorAll('g.frame')].find(x => x.getAttribute('name') === n);
      return g && Number(g.querySelector('rect').getAttribute('width')) >= 0.98 * Number(svg.getAttribute('width'));
    }, name), 5000);
    if (!zoomed) fail(`clicking "${name}" (width ${before}) did not zoom it to the full width`);
    await page.click('#reset-zoom');
    await sleep(300);
  }

  // Search highlights matching frames, and only those.
  if (expect.search) {
    await page.fill('#search', expect.search);
    const hl = await until(async () => { const h = await highlighted(); return h.length > 0 && h; }, 5000);
    if (!hl) fail(`search "${expect.search}" highlights nothing`);
    else {
      const wrong = hl.filter(n => !n.toLowerCase().includes(expect.search.toLowerCase()));
      const fileMatch = await page.evaluate(t => window.pbpReport.data.files.some(f => f.toLowerCase().includes(t.toLowerCase())), expect.search);
      if (wrong.length && !fileMatch) fail(`search "${expect.search}" also highlights ${JSON.stringify(wrong.slice(0, 5))}`);
      const count = await page.textContent('#search-count');
      if (!/match/.test(count)) fail(`search count says ${JSON.stringify(count)}`);
      info.push(`search "${expect.search}": ${hl.length} frames highlighted`);
    }
    await page.fill('#search', '');
    const cleared = await until(async () => (await highlighted()).length === 0, 3000);
    if (!cleared) fail('clearing the search leaves highlights');
  }

  // Inverted view: the hottest function by self time is at the first level.
  const hottest = await page.evaluate(() => {
    const r = document.querySelector('#top-table tbody tr[data-fn]');
    return r ? r.dataset.fn : null;
  });
  if (hottest) {
    await page.check('#inverted');
    // In the callers view the first level holds the leaf functions, the widest being the
    // hottest by self time.
    const top = await until(() => page.evaluate(n => {
      const level1 = [...document.querySelectorAll('#flame svg g.frame')].map(g => {
        const m = /translate\(\s*([-\d.e]+)[\s,]+([-\d.e]+)\s*\)/.exec(g.getAttribute('transform') || '');
        return { name: g.getAttribute('name'), y: m ? Number(m[2]) : -1, w: Number(g.querySelector('rect').getAttribute('width')) };
      }).filter(f => Math.abs(f.y - 18) < 0.5);
      const max = Math.max(0, ...level1.map(f => f.w));
      return level1.some(f => f.name === n && f.w > 0 && f.w >= max - 0.5);
    }, hottest), 5000);
    if (!top) fail(`inverted view does not show the hottest function "${hottest}" at the first level`);
    await page.uncheck('#inverted');
    await sleep(300);
  }

  // The top table sorts: by Total (descending) and by Function name (ascending), then back.
  {
    const selfCol = () => page.evaluate(() => [...document.querySelectorAll('#top-table tbody tr[data-fn]')]
      .map(r => ({ name: r.dataset.fn, total: r.children[2].innerText, self: r.children[1].innerText })));
    const before = await topText();
    await page.click('#top-table th[data-key="name"]');
    const byName = await until(async () => {
      const rows = await selfCol();
      const names = rows.map(r => r.name);
      return names.length > 1 && names.every((n, i) => i === 0 || names[i - 1].localeCompare(n) <= 0);
    }, 5000);
    if (!byName) fail('clicking the Function heading does not sort the top table by name');
    else info.push('top table sorts by function name');
    await page.click('#top-table th[data-key="total"]');
    const firstTotal = await until(async () => {
      const h = await page.getAttribute('#top-table th[data-key="total"]', 'class');
      return h && h.includes('sorted desc');
    }, 5000);
    if (!firstTotal) fail('clicking the Total heading does not sort by total');
    await page.click('#top-table th[data-key="self"]');
    const restored = await until(async () => (await topText()) === before, 5000);
    if (!restored) fail('sorting by Self again does not restore the top table');
  }

  // Pods (processes with Kubernetes labels): one row each; clicking one scopes everything to
  // its processes (the process table lists only them), clicking it again restores.
  const podRows = await page.locator('#pod-table tbody tr.pod-row').count();
  if (expect.pods !== undefined) {
    if (podRows !== expect.pods) fail(`${podRows} pod rows, want ${expect.pods}`);
    if (expect.pods === 0 && await page.isVisible('#pod-section')) fail('the Pods section shows without pods');
  }
  for (let i = 0; i < Math.min(podRows, 6); i++) {
    const row = page.locator('#pod-table tbody tr.pod-row').nth(i);
    const key = await row.getAttribute('data-pod');
    const before = await totals();
    if (!(await clickRow(row, `pod ${key}`))) break;
    const scoped = await until(async () => (await page.textContent('#scope-proc')).includes(`pod ${key}`), 5000);
    if (!scoped) { fail(`clicking pod ${key} does not scope to it`); break; }
    const inPod = await page.locator('#proc-table tbody tr.proc-row').count();
    if (expect.pod_processes && expect.pod_processes[key] !== undefined && inPod !== expect.pod_processes[key])
      fail(`pod ${key}: ${inPod} process rows, want ${expect.pod_processes[key]}`);
    const t = await totals();
    if (podRows > 1 && t === before) fail(`clicking pod ${key} does not change the totals`);
    else info.push(`pod ${key} click scopes to ${inPod} processes`);
    if (!(await clickRow(page.locator(`#pod-table tbody tr.pod-row[data-pod="${key}"]`), `pod ${key} again`))) break;
    const back = await until(async () => (await totals()) === before, 5000);
    if (!back) fail(`clicking pod ${key} again does not restore the totals`);
  }

  // Clicking a process changes the top table; clicking it again restores it.
  const procRows = await page.locator('#proc-table tbody tr.proc-row').count();
  if (expect.min_processes && procRows < expect.min_processes) fail(`${procRows} process rows, want >= ${expect.min_processes}`);
  // Texts the process table must show (a merged profile's hosts and labels).
  const procTable = await page.evaluate(() => document.querySelector('#proc-table').innerText);
  for (const want of expect.proc_text || [])
    if (!procTable.includes(want)) fail(`the process table does not show ${JSON.stringify(want)}: ${JSON.stringify(procTable.slice(0, 300))}`);
  if ((expect.proc_text || []).length) info.push(`process table shows ${expect.proc_text.length} expected texts`);
  const topAll = await topText();
  let changed = false;
  for (let i = 0; i < Math.min(procRows, 6) && !changed; i++) {
    const row = page.locator('#proc-table tbody tr.proc-row').nth(i);
    const pid = await row.getAttribute('data-pid');
    const proc = await row.getAttribute('data-proc');  // (PIDs repeat in a profile merged from several machines)
    if (!(await clickRow(row, `process ${pid}`))) break;
    const scoped = await until(async () => (await page.textContent('#scope-proc')).includes(`pid ${pid}`), 5000);
    if (!scoped) { fail(`clicking process ${pid} does not scope to it`); break; }
    const t = await topText();
    if (t !== topAll) { changed = true; info.push(`process ${pid} click changes the top table`); }
    if (!(await clickRow(page.locator(`#proc-table tbody tr.proc-row[data-proc="${proc}"]`), `process ${pid} again`))) break;
    const back = await until(async () => (await topText()) === topAll, 5000);
    if (!back) fail(`clicking process ${pid} again does not restore the top table`);
  }
  if (procRows >= 2 && !changed) fail('clicking a process does not change the top table');
  // A thread.
  const threadRow = page.locator('#thread-table tbody tr.thread-row').first();
  if (await threadRow.count()) {
    const tid = await threadRow.getAttribute('data-tid');
    await clickRow(threadRow, `thread ${tid}`);
    const scoped = await until(async () => (await page.textContent('#scope-proc')).includes(`tid ${tid}`), 5000);
    if (!scoped) fail(`clicking thread ${tid} does not scope to it`);
    await page.click('#reset-all');
    await until(async () => (await topText()) === topAll, 5000);
  }

  // Dragging a time range on the timeline changes the totals; Reset restores them.
  const all = await totals();
  const overlay = page.locator('#timeline .tl-brush .overlay');
  if (!(await overlay.count())) fail('no timeline brush');
  else {
    await overlay.scrollIntoViewIfNeeded();
    await page.evaluate(() => window.scrollBy(0, -120));  // clear of the sticky scope bar
    const box = await overlay.boundingBox();
    // The middle of the part of the rows in view (many rows scroll in their own box).
    const view = await page.locator('#timeline .tl-scroll').boundingBox();
    const y = view ? (Math.max(box.y, view.y) + Math.min(box.y + box.height, view.y + view.height)) / 2 : box.y + box.height / 2;
    await page.mouse.move(box.x + box.width * 0.05, y);
    await page.mouse.down();
    await page.mouse.move(box.x + box.width * 0.3, y, { steps: 5 });
    await page.mouse.move(box.x + box.width * 0.45, y, { steps: 5 });
    const tUp = Date.now();
    await page.mouse.up();
    const after = await until(async () => { const v = await totals(); return v !== all && v; }, 10000, 10);
    const updateMs = Date.now() - tUp;
    if (!after) fail(`dragging a time range does not change the totals (${all})`);
    else {
      const steps = await page.evaluate(() => JSON.stringify(window.pbpReport.timings));
      info.push(`range drag: ${all} -> ${after} samples in ${updateMs} ms (${steps})`);
      if (after > all) fail(`a sub-range has more samples (${after}) than the whole run (${all})`);
      if (expect.max_update_ms && updateMs > expect.max_update_ms) fail(`re-scoping took ${updateMs} ms > ${expect.max_update_ms} ms`);
      const chip = await page.textContent('#scope-range');
      if (/whole run/.test(chip)) fail(`range chip still says ${JSON.stringify(chip)}`);
    }
    await page.click('#reset-all');
    const restored = await until(async () => (await totals()) === all, 5000);
    if (!restored) fail('Reset does not restore the totals');
  }
  // The totals count weight units (one per sample when every sample weighs one period).
  const runUnits = run.weight_units ?? run.samples;
  if (all !== runUnits) fail(`totals for the whole run ${all} != ${runUnits} units (${run.samples} samples)`);

  // Task lanes and key-prefix scoping (a run with task spans).
  const hasTasks = await page.evaluate(() => !!window.pbpReport.data.tasks);
  if ((expect.task_lanes !== undefined || expect.scope_prefix || expect.prefixes) && !hasTasks) fail('the report has no task spans');
  if (hasTasks) {
    if (!(await page.isVisible('#tasks-section'))) fail('the Tasks section is hidden');
    await page.locator('#task-lanes').scrollIntoViewIfNeeded();
    const lanes = await page.evaluate(() => {
      const elx = document.getElementById('task-lanes');
      const c = elx.querySelector('canvas');
      if (!c) return { n: Number(elx.dataset.lanes || 0), painted: [], spans: 0 };
      const ctx = c.getContext('2d');
      const n = Number(elx.dataset.lanes), h = c.height, w = c.width, rh = h / Math.max(1, n);
      const dpr = window.devicePixelRatio || 1, x0 = Math.ceil(230 * dpr);
      // Per lane: the pixels of its middle row, right of the labels, that are neither the
      // background nor the alternate-row grey.
      const painted = [];
      for (let i = 0; i < n; i++) {
        const y = Math.floor(i * rh + rh / 2);
        const d = ctx.getImageData(x0, y, w - x0, 1).data;
        let k = 0;
        for (let j = 0; j < d.length; j += 4) {
          const [r, g, b, a] = [d[j], d[j + 1], d[j + 2], d[j + 3]];
          if (a > 0 && !(r === g && g === b && r >= 240)) k++;
        }
        painted.push(k);
      }
      return { n, painted, spans: Number(elx.dataset.spans) };
    });
    if (expect.task_lanes !== undefined && lanes.n !== expect.task_lanes) fail(`${lanes.n} task lanes, want ${expect.task_lanes}`);
    const bare = lanes.painted.map((k, i) => [k, i]).filter(([k]) => k === 0).map(([, i]) => i);
    if (!lanes.n || bare.length) fail(`task lanes without any drawn span: ${JSON.stringify(bare)} of ${lanes.n}`);
    else info.push(`${lanes.n} task lanes drawn (${lanes.spans} spans)`);
    const rows = await page.evaluate(() => [...document.querySelectorAll('#prefix-table tbody tr.prefix-row')]
      .map(r => ({ name: r.dataset.prefix, units: Number(r.dataset.units), cpu: Number(r.dataset.cpuS), compute: Number(r.dataset.computeS), tasks: Number(r.dataset.tasks) })));
    for (const want of expect.prefixes || [])
      if (!rows.some(r => r.name === want)) fail(`the prefix table has no row ${JSON.stringify(want)} (rows: ${JSON.stringify(rows.map(r => r.name).slice(0, 20))})`);
    if (expect.scope_prefix) {
      const row = rows.find(r => r.name === expect.scope_prefix);
      if (!row) fail(`no prefix row ${JSON.stringify(expect.scope_prefix)}`);
      else {
        const before = await totals();
        const topBefore = await topText();
        await page.locator(`#prefix-table tbody tr.prefix-row[data-prefix="${expect.scope_prefix.replace(/"/g, '\\"')}"]`).click();
        const after = await until(async () => { const v = await totals(); return v !== before && v; }, 10000, 20);
        if (!after) fail(`selecting prefix ${expect.scope_prefix} does not change the totals (${before})`);
        else {
          if (after !== row.units) fail(`prefix ${expect.scope_prefix}: the totals are ${after} units, its table row says ${row.units}`);
          const chip = await page.textContent('#scope-prefix');
          if (!chip.includes(expect.scope_prefix)) fail(`the scope bar says ${JSON.stringify(chip)} for prefix ${expect.scope_prefix}`);
          if ((await topText()) === topBefore) fail(`selecting prefix ${expect.scope_prefix} does not change the top table`);
          const selected = await page.evaluate(() => window.pbpReport.state.prefix >= 0 && window.pbpReport.prefixes[window.pbpReport.state.prefix].name);
          if (selected !== expect.scope_prefix) fail(`state.prefix is ${JSON.stringify(selected)}`);
          info.push(`prefix ${expect.scope_prefix}: totals ${before} -> ${after} units (CPU ${row.cpu.toFixed(2)} s in ${row.tasks} tasks, compute ${row.compute.toFixed(2)} s)`);
        }
        await page.locator(`#prefix-table tbody tr.prefix-row[data-prefix="${expect.scope_prefix.replace(/"/g, '\\"')}"]`).click();
        const back = await until(async () => (await totals()) === before, 5000);
        if (!back) fail(`clicking prefix ${expect.scope_prefix} again does not restore the totals`);
      }
    }
  }

  // GIL lanes: per thread with a known GIL state, a "held" and a "waiting" lane, each drawn
  // (on the section's canvas: pixels of the lane's colour inside the lane) as bins whose
  // shares, times the bin, add up to the thread's held / waiting time; threads without one say
  // n/a; the process table says each process's GIL utilisation (or n/a).
  if (expect.gil) {
    const g = expect.gil;
    if (!(await page.isVisible('#gil-section'))) fail('the GIL section is hidden');
    await page.locator('#gil-lanes').scrollIntoViewIfNeeded();
    // Per lane: what it says it drew, and the pixels of its colour on the canvas inside its box.
    const lanesInfo = () => page.evaluate(() => {
      const canvas = document.querySelector('#gil-lanes canvas');
      const ctx = canvas && canvas.getContext('2d');
      const cr = canvas ? canvas.getBoundingClientRect() : null;
      const sx = canvas ? canvas.width / cr.width : 1, sy = canvas ? canvas.height / cr.height : 1;
      const colour = { held: [0x2e, 0x8b, 0x57], waiting: [0xd9, 0x53, 0x4f] };
      const lanes = [...document.querySelectorAll('#gil-lanes g.gil-lane')].map(l => {
        let painted = 0;
        const b = l.querySelector('rect.gil-lane-box');
        if (ctx && b) {
          const r = b.getBoundingClientRect();
          const x0 = Math.round((r.left - cr.left) * sx), y0 = Math.round((r.top - cr.top) * sy);
          const w = Math.max(1, Math.round(r.width * sx)), hh = Math.max(1, Math.round(r.height * sy));
          const d = ctx.getImageData(x0, y0, w, hh).data;
          const c = colour[l.dataset.kind];
          for (let j = 0; c && j < d.length; j += 4)
            if (Math.abs(d[j] - c[0]) < 40 && Math.abs(d[j + 1] - c[1]) < 40 && Math.abs(d[j + 2] - c[2]) < 40 && d[j + 3] > 0) painted++;
        }
        return { tid: Number(l.dataset.tid), kind: l.dataset.kind, bins: Number(l.dataset.bins), runs: Number(l.dataset.runs),
          visible: painted, seconds: Number(l.dataset.seconds) };
      });
      const na = [...document.querySelectorAll('#gil-lanes g.gil-thread')].filter(t => t.querySelector('.gil-na')).map(t => Number(t.dataset.tid));
      const util = [...document.querySelectorAll('#proc-table td.gil-util')].map(td => [Number(td.dataset.pid), td.textContent]);
      return { lanes, na, util };
    });
    const drawn = await lanesInfo();
    const nLanes = drawn.lanes.length;
    if (g.lanes !== undefined && nLanes !== g.lanes) fail(`${nLanes} GIL lanes, want ${g.lanes}`);
    for (const [tid, want] of Object.entries(g.held_s || {})) {
      const l = drawn.lanes.find(x => x.tid === Number(tid) && x.kind === 'held');
      if (!l) { fail(`no GIL held lane for tid ${tid}`); continue; }
      if (!l.visible) fail(`the GIL held lane of tid ${tid} draws nothing visible`);
      if (Math.abs(l.seconds - want) > 0.011) fail(`tid ${tid} holds the GIL ${l.seconds.toFixed(3)} s in its lane, want ${want}`);
    }
    for (const [tid, want] of Object.entries(g.waiting_s || {})) {
      const l = drawn.lanes.find(x => x.tid === Number(tid) && x.kind === 'waiting');
      if (!l) { fail(`no GIL waiting lane for tid ${tid}`); continue; }
      if (Math.abs(l.seconds - want) > 0.011) fail(`tid ${tid} waits for the GIL ${l.seconds.toFixed(3)} s in its lane, want ${want}`);
    }
    // A lane that says it drew bins shows pixels of its colour.
    const blank = drawn.lanes.filter(l => l.bins > 0 && !l.visible);
    if (blank.length) fail(`GIL lanes that drew bins but show none of their colour: ${JSON.stringify(blank.slice(0, 5).map(l => `${l.tid} ${l.kind}`))}`);
    for (const tid of g.na || []) if (!drawn.na.includes(tid)) fail(`tid ${tid} does not say GIL n/a`);
    for (const [pid, text] of Object.entries(g.util || {})) {
      const u = drawn.util.find(([p]) => p === Number(pid));
      if (!u || u[1] !== text) fail(`process ${pid} GIL utilisation ${u ? JSON.stringify(u[1]) : 'missing'}, want ${JSON.stringify(text)}`);
    }
    const mode = await page.textContent('#summary [data-key="mode"] .v').catch(() => '');
    if (g.mode && !String(mode).startsWith(g.mode)) fail(`the summary says mode ${JSON.stringify(mode)}, want ${g.mode}`);
    const bins = drawn.lanes.reduce((a, l) => a + l.bins, 0);
    info.push(`${nLanes} GIL lanes drawn (${bins} bins; ${drawn.lanes.slice(0, 8).map(l => `${l.tid} ${l.kind} ${l.seconds.toFixed(2)} s`).join(', ')}` +
      `${nLanes > 8 ? ', …' : ''}), GIL n/a for ${drawn.na.length} threads, utilisation ${drawn.util.map(([p, t]) => `${p}: ${t}`).join(', ')}, mode ${JSON.stringify(mode)}`);

    // Rows as the timeline's: grouped by process (g.groups process rows; a group closes and
    // opens), every thread labelled as the timeline labels it (the same text for the same tid)
    // and with its Python name (g.thread_names), every thread with samples drawn (g.threads) or
    // the legend saying how many are not.
    const gilRows = () => page.evaluate(() => {
      const sc = document.querySelector('#gil-lanes .gil-scroll');
      const rows = [...document.querySelectorAll('#gil-lanes g.gil-row')].map(r => {
        const t = r.querySelector('text.tl-label-text');
        const b = t ? t.getBoundingClientRect() : { height: 0, width: 0 };
        return { kind: r.dataset.kind, pid: Number(r.dataset.pid), tid: r.dataset.tid ? Number(r.dataset.tid) : null,
          n: Number(r.dataset.threads || 0), open: r.dataset.open === 'true',
          label: r.dataset.label || '', text: t ? t.textContent : '', h: b.height, w: b.width };
      });
      const tl = Object.fromEntries([...document.querySelectorAll('#timeline g.tl-row.tl-thread')].map(r => [r.dataset.tid, r.dataset.label || r.querySelector('text').textContent]));
      return { rows, tl, scrollH: sc ? sc.scrollHeight : 0, clientH: sc ? sc.clientHeight : 0,
        legend: document.getElementById('gil-legend').textContent };
    });
    const gr = await gilRows();
    const gThreads = gr.rows.filter(r => r.kind === 'thread'), gProcs = gr.rows.filter(r => r.kind === 'proc');
    if (!gr.rows.length) fail('the GIL section has no rows (g.gil-row)');
    if (g.groups !== undefined && gProcs.length !== g.groups) fail(`${gProcs.length} process groups in the GIL section, want ${g.groups}`);
    // Every thread is drawn, or is in a closed group, which the legend counts.
    const inClosed = gProcs.filter(r => !r.open).reduce((a, r) => a + r.n, 0);
    if (g.threads !== undefined && gThreads.length + inClosed !== g.threads)
      fail(`${gThreads.length} thread rows and ${inClosed} in closed groups in the GIL section, want ${g.threads} threads (legend: ${JSON.stringify(gr.legend)})`);
    if (inClosed && !gr.legend.includes(`${inClosed.toLocaleString('en-US')} of `)) fail(`the GIL legend does not say ${inClosed} threads are in closed groups: ${JSON.stringify(gr.legend)}`);
    const unlabelled = gr.rows.filter(r => !r.text || r.text.length < 3 || r.h < 8 || r.w < 10);
    if (unlabelled.length) fail(`GIL rows without a readable label: ${JSON.stringify(unlabelled.slice(0, 5).map(r => r.tid ?? r.pid))} of ${gr.rows.length}`);
    const differ = gThreads.filter(r => gr.tl[r.tid] !== undefined && gr.tl[r.tid] !== r.label);
    if (differ.length) fail(`GIL rows labelled otherwise than the timeline: ${JSON.stringify(differ.slice(0, 5).map(r => [r.label, gr.tl[r.tid]]))}`);
    const misnamed = [];
    for (const [tid, name] of Object.entries(g.thread_names || {})) {
      const r = gThreads.find(x => x.tid === Number(tid));
      if (!r) misnamed.push(`tid ${tid} (${name}) has no row`);
      else if (!r.label.startsWith(name + ' (tid ')) misnamed.push(`tid ${tid} says ${JSON.stringify(r.label)}, not ${JSON.stringify(name)}`);
    }
    if (misnamed.length) fail(`${misnamed.length} of ${Object.keys(g.thread_names).length} threads not named in the GIL section as they are named: ${misnamed.slice(0, 4).join('; ')}`);
    if (g.scrolls && !(gr.scrollH > gr.clientH + 1)) fail(`the GIL rows (${gr.scrollH} px) do not scroll in their own box (${gr.clientH} px)`);
    if (gr.rows.length) {
      // The last row, scrolled into its box, is in view and labelled.
      const last = await page.evaluate(() => {
        const sc = document.querySelector('#gil-lanes .gil-scroll');
        sc.scrollTop = sc.scrollHeight;
        const rows = document.querySelectorAll('#gil-lanes g.gil-row');
        const t = rows[rows.length - 1].querySelector('text');
        const b = t.getBoundingClientRect(), s = sc.getBoundingClientRect();
        const inView = b.top >= s.top - 1 && b.bottom <= s.bottom + 1;
        sc.scrollTop = 0;
        return { inView, text: t.textContent };
      });
      if (!last.inView) fail(`the last GIL row (${JSON.stringify(last.text)}) is not in view when scrolled to`);
    }
    if (gProcs.length) {
      // Close the first group, then open it again (or open it, then close it): its thread rows
      // go and come back; opened, each of its lanes with bins shows them.
      const first = gProcs[0], pid = first.pid;
      const tri = async () => {
        const loc = page.locator(`#gil-lanes g.gil-row.gil-proc[data-pid="${pid}"] rect.tl-label`);
        await loc.evaluate(e => e.scrollIntoView({ block: 'center' }));
        const b = await loc.boundingBox();
        await page.mouse.click(b.x + 6, b.y + b.height / 2);
      };
      const verb = first.open ? 'close' : 'open';
      const toggled = gr.rows.length + (first.open ? -first.n : first.n);
      await tri();
      const t1 = await until(async () => (await gilRows()).rows.length === toggled, 10000);
      if (!t1) fail(`clicking the GIL triangle of pid ${pid} does not ${verb} its ${first.n} thread rows (${(await gilRows()).rows.length} rows, want ${toggled})`);
      else if (!first.open) {
        const opened = await lanesInfo();
        const blankOpen = opened.lanes.filter(l => l.bins > 0 && !l.visible);
        if (blankOpen.length) fail(`opened, GIL lanes that drew bins show none of their colour: ${JSON.stringify(blankOpen.slice(0, 5).map(l => `${l.tid} ${l.kind}`))}`);
        info.push(`opening pid ${pid}: ${opened.lanes.length} GIL lanes drawn`);
      }
      await tri();
      const t2 = await until(async () => (await gilRows()).rows.length === gr.rows.length, 10000);
      if (!t2) fail(`clicking the GIL triangle of pid ${pid} again does not ${first.open ? 'open' : 'close'} its group`);
      const back = await lanesInfo();
      if (back.lanes.length !== nLanes) fail(`after two clicks on pid ${pid}: ${back.lanes.length} GIL lanes, was ${nLanes}`);
      info.push(`GIL rows: ${gr.rows.length} (${gProcs.length} process groups, ${gThreads.length} threads${inClosed ? `, ${inClosed} in closed groups` : ''}, ` +
        `labelled as in the timeline); ${verb === 'close' ? 'closing' : 'opening'} pid ${pid} ${verb === 'close' ? 'hides' : 'shows'} ${first.n}; box ${gr.clientH}/${gr.scrollH} px`);
    }
    // The box stays bounded and the flame graph near the top, at both window sizes.
    if (g.max_box_h || g.flame_within_screens) {
      for (const [w, h] of [[1400, 1000], [1000, 800]]) {
        await page.setViewportSize({ width: w, height: h });
        await sleep(700);  // the page redraws 150 ms after a resize
        const geo = await page.evaluate(() => {
          const box = document.getElementById('gil-lanes').getBoundingClientRect();
          const flame = document.getElementById('flame-section').getBoundingClientRect();
          return { boxH: box.height, flameTop: flame.top + window.scrollY, vh: window.innerHeight };
        });
        if (g.max_box_h && geo.boxH > g.max_box_h) fail(`at ${w}x${h} the GIL box is ${geo.boxH.toFixed(0)} px high (> ${g.max_box_h})`);
        if (g.flame_within_screens && geo.flameTop > g.flame_within_screens * geo.vh)
          fail(`at ${w}x${h} the flame graph starts at ${geo.flameTop.toFixed(0)} px (> ${g.flame_within_screens} screens, ${(g.flame_within_screens * geo.vh).toFixed(0)} px)`);
        info.push(`${w}x${h}: GIL box ${geo.boxH.toFixed(0)} px, flame graph at ${geo.flameTop.toFixed(0)} px`);
      }
      await page.setViewportSize({ width: 1400, height: 1000 });
      await sleep(700);
    }
  }

  // CPU and memory charts.
  const series = await page.evaluate(() => document.querySelectorAll('#cpu-chart .uplot canvas, #rss-chart .uplot canvas').length);
  if (expect.resources && series < 2) fail('no CPU/memory charts drawn');

  // The CPU and memory charts share the timeline's time axis: the same domain and the same
  // plot area left and right edges (the brush's overlay is the timeline's plot area).
  if (series >= 2) {
    await page.locator('#resources-section').scrollIntoViewIfNeeded();
    const axes = await page.evaluate(() => {
      const tl = document.querySelector('#timeline .tl-brush .overlay').getBoundingClientRect();
      const overs = [...document.querySelectorAll('#resources-section .u-over')].map(o => o.getBoundingClientRect());
      return { domain: window.pbpReport.timelineDomain(), scales: window.pbpReport.chartScales(),
        tl: [tl.left, tl.right], overs: overs.map(r => [r.left, r.right]) };
    });
    for (const [i, sc] of axes.scales.entries()) {
      if (Math.abs(sc.min - axes.domain[0]) > 1e-9 || Math.abs(sc.max - axes.domain[1]) > 1e-9)
        fail(`chart ${JSON.stringify(sc.title)} x scale ${sc.min}..${sc.max} != the timeline's ${axes.domain[0]}..${axes.domain[1]}`);
      const o = axes.overs[i];
      if (!o || Math.abs(o[0] - axes.tl[0]) > 2 || Math.abs(o[1] - axes.tl[1]) > 2)
        fail(`chart ${JSON.stringify(sc.title)} plot area ${JSON.stringify(o)} is not aligned with the timeline's ${JSON.stringify(axes.tl)}`);
    }
    info.push(`${axes.scales.length} charts on the timeline's axis (0..${axes.domain[1].toFixed(2)} s, plot ` +
      `${axes.tl.map(v => v.toFixed(1)).join('-')} px vs ${axes.overs.map(o => o.map(v => v.toFixed(1)).join('-')).join(', ')})`);
  }

  // The timeline: rows grouped by process, every row labelled (also far down a long list),
  // labelled with the thread's name; a group closes and opens.
  if (expect.timeline) {
    const tl = expect.timeline;
    await page.locator('#timeline').scrollIntoViewIfNeeded();
    const rowsInfo = () => page.evaluate(() => {
      const sc = document.querySelector('#timeline .tl-scroll');
      const rows = [...document.querySelectorAll('#timeline g.tl-row')].map(g => {
        const t = g.querySelector('text');
        const b = t.getBoundingClientRect();
        return { kind: g.dataset.kind, pid: Number(g.dataset.pid), tid: g.dataset.tid ? Number(g.dataset.tid) : null, text: t.textContent,
          h: b.height, w: b.width, font: parseFloat(getComputedStyle(t).fontSize) };
      });
      return { rows, scrollH: sc.scrollHeight, clientH: sc.clientHeight };
    });
    let r = await rowsInfo();
    const threadRows = r.rows.filter(x => x.kind === 'thread');
    if (tl.min_rows && r.rows.length < tl.min_rows) fail(`${r.rows.length} timeline rows, want >= ${tl.min_rows}`);
    const unlabelled = r.rows.map((x, i) => [x, i]).filter(([x]) => !x.text || x.text.length < 3 || x.h < 8 || x.w < 10 || x.font < 10).map(([, i]) => i);
    if (unlabelled.length) fail(`timeline rows without a readable label: ${JSON.stringify(unlabelled.slice(0, 10))} of ${r.rows.length}`);
    const groups = r.rows.filter(x => x.kind === 'proc');
    if (tl.groups !== undefined && groups.length !== tl.groups) fail(`${groups.length} process groups in the timeline, want ${tl.groups}`);
    for (const [tid, name] of Object.entries(tl.thread_names || {})) {
      const row = threadRows.find(x => x.tid === Number(tid));
      if (!row) fail(`no timeline row for tid ${tid}`);
      else if (!row.text.startsWith(name)) fail(`timeline row of tid ${tid} says ${JSON.stringify(row.text)}, want the name ${JSON.stringify(name)}`);
    }
    // The last row, scrolled into its box, is in view and labelled.
    const last = await page.evaluate(() => {
      const sc = document.querySelector('#timeline .tl-scroll');
      sc.scrollTop = sc.scrollHeight;
      const rows = document.querySelectorAll('#timeline g.tl-row');
      const t = rows[rows.length - 1].querySelector('text');
      const b = t.getBoundingClientRect(), s = sc.getBoundingClientRect();
      const hit = document.elementFromPoint(Math.min(b.left + 4, s.right - 1), b.top + b.height / 2);
      const inView = b.top >= s.top - 1 && b.bottom <= s.bottom + 1;
      sc.scrollTop = 0;
      return { inView, text: t.textContent, hitsRow: !!(hit && hit.closest('#timeline')) };
    });
    if (!last.inView || !last.hitsRow) fail(`the last timeline row (${JSON.stringify(last.text)}) is not in view when scrolled to`);
    // A thread's label scopes to that thread (and clicking it again clears it).
    const tr = threadRows[threadRows.length > 1 ? 1 : 0];
    if (tr) {
      const lab = page.locator(`#timeline g.tl-row.tl-thread[data-tid="${tr.tid}"] rect`);
      await lab.evaluate(e => e.scrollIntoView({ block: 'center' }));
      await lab.click({ force: true });
      const scoped = await until(async () => (await page.textContent('#scope-proc')).includes(`tid ${tr.tid}`), 5000);
      if (!scoped) fail(`clicking the timeline label of tid ${tr.tid} does not scope to it`);
      await page.locator(`#timeline g.tl-row.tl-thread[data-tid="${tr.tid}"] rect`).click({ force: true });
      const cleared = await until(async () => !(await page.textContent('#scope-proc')).includes(`tid ${tr.tid}`), 5000);
      if (!cleared) fail(`clicking the timeline label of tid ${tr.tid} again does not clear the scope`);
      await page.evaluate(() => { document.querySelector('#timeline .tl-scroll').scrollTop = 0; });
      r = await rowsInfo();
    }
    // Close the first group with several threads, then open it again.
    if (groups.length) {
      const pid = groups[0].pid;
      const before = r.rows.length;
      const inGroup = r.rows.filter(x => x.pid === pid && x.kind === 'thread').length;
      const tri = async () => {
        const b = await page.locator(`#timeline g.tl-row.tl-proc[data-pid="${pid}"] rect`).boundingBox();
        await page.mouse.click(b.x + 6, b.y + b.height / 2);
      };
      await tri();
      const closed = await until(async () => (await rowsInfo()).rows.length === before - inGroup, 5000);
      if (!closed) fail(`clicking the triangle of pid ${pid} does not close its ${inGroup} thread rows (${(await rowsInfo()).rows.length} rows)`);
      await tri();
      const opened = await until(async () => (await rowsInfo()).rows.length === before, 5000);
      if (!opened) fail(`clicking the triangle of pid ${pid} again does not open its group`);
      info.push(`timeline: ${before} rows (${groups.length} process groups, ${threadRows.length} thread rows), all labelled; ` +
        `closing pid ${pid} hides ${inGroup} rows; rows box ${r.clientH}/${r.scrollH} px`);
    }
  }

  // The flame graph's box is bounded (it scrolls on its own) and long single-child chains are
  // collapsed into one bar that expands on click.
  if (expect.flame_bounded) {
    const fb = expect.flame_bounded;
    await page.evaluate(() => window.scrollTo(0, 0));
    const geom = () => page.evaluate(() => {
      const f = document.getElementById('flame').getBoundingClientRect();
      const top = document.getElementById('top-section').getBoundingClientRect();
      const svg = document.querySelector('#flame svg');
      const frames = [...document.querySelectorAll('#flame svg g.frame')];
      const collapsed = frames.filter(g => g.__data__ && g.__data__.data.collapsed).map(g => g.__data__.data.collapsed.n);
      const depth = Math.max(0, ...frames.map(g => (g.__data__ ? g.__data__.depth : 0)));
      return { boxH: f.height, svgH: Number(svg.getAttribute('height')), flameTop: f.top + window.scrollY,
        tablesTop: top.top + window.scrollY, vh: window.innerHeight, collapsed, depth };
    });
    const g0 = await geom();
    const maxH = fb.max_height || 0.8 * g0.vh;
    if (g0.boxH > maxH) fail(`the flame graph box is ${g0.boxH} px high (> ${maxH})`);
    if (g0.tablesTop - g0.flameTop > g0.vh) fail(`the tables start ${g0.tablesTop - g0.flameTop} px below the flame graph's top (> one screen, ${g0.vh})`);
    if (fb.collapsed_at_least) {
      const n = Math.max(0, ...g0.collapsed);
      if (n < fb.collapsed_at_least) fail(`the longest collapsed run is ${n} frames, want >= ${fb.collapsed_at_least} (depth ${g0.depth})`);
      else {
        // Clicked again (up to 3 times) only while nothing expanded: on a loaded machine a
        // click can land on a bar the first render is still replacing (CI, 2026-11-24: once).
        let g1 = null;
        for (let attempt = 0; attempt < 3 && !g1; attempt++) {
          const bar = page.locator('#flame svg g.frame').filter({ hasText: 'click to expand' }).first();
          if (!(await bar.count())) break;
          await bar.click({ force: true });
          g1 = await until(async () => { const g = await geom(); return g.depth > g0.depth + fb.collapsed_at_least / 2 && g; }, 5000);
        }
        if (!g1) fail('clicking a collapsed run does not expand it');
        else {
          if (g1.boxH > maxH) fail(`expanded, the flame graph box is ${g1.boxH} px high (> ${maxH})`);
          if (g1.tablesTop - g1.flameTop > g1.vh) fail(`expanded, the tables start ${g1.tablesTop - g1.flameTop} px below the flame graph`);
          info.push(`flame graph: box ${g0.boxH.toFixed(0)} px (svg ${g0.svgH}), tables ${(g0.tablesTop - g0.flameTop).toFixed(0)} px below its top, ` +
            `depth ${g0.depth} with a ${n}-frame run collapsed; expanded: depth ${g1.depth}, svg ${g1.svgH} px in a ${g1.boxH.toFixed(0)} px box`);
        }
      }
    }
  }

  // A process level in the flame graph: one node per process under the root, with its total.
  if (expect.process_level) {
    const level = await page.evaluate(() => [...document.querySelectorAll('#flame svg g.frame')]
      .filter(g => g.__data__ && g.__data__.depth === 1)
      .map(g => ({ proc: g.__data__.data.proc, pid: g.__data__.data.proc !== undefined ? window.pbpReport.procs[g.__data__.data.proc].pid : null,
        value: g.__data__.value, name: g.__data__.data.name })));
    const want = expect.process_level;
    const got = Object.fromEntries(level.filter(l => l.pid !== null).map(l => [String(l.pid), l.value]));
    if (level.length !== Object.keys(want).length || level.some(l => l.pid === null))
      fail(`the flame graph's first level is ${JSON.stringify(level.map(l => l.name))}, want one node per process ${JSON.stringify(Object.keys(want))}`);
    for (const [pid, v] of Object.entries(want))
      if (got[pid] !== v) fail(`process ${pid} in the flame graph totals ${got[pid]}, want ${v}`);
    info.push(`flame graph process level: ${level.map(l => `${l.pid}=${l.value}`).join(', ')}`);
  }

  // --native frames (expect.kinds): each kind has its colour (native aqua hsl(185, ...),
  // kernel green hsl(95, ...), Python neither), and "Hide native frames" / "Hide kernel
  // frames" take those frames out of the flame graph and the top table, their time going to
  // their caller: the self time of the named functions becomes what hide_native / hide_kernel
  // / hide_both say (in units), the total stays; unticked, every frame is back.
  if (expect.kinds) {
    const k = expect.kinds;
    const flame = () => page.evaluate(() => {
      const by = {};
      let self = 0;
      for (const g of document.querySelectorAll('#flame svg g.frame')) {
        const d = g.__data__;
        if (!d || !(d.data.fid >= 0)) continue;
        const name = d.data.name;
        const e = by[name] || (by[name] = { self: 0, fills: [] });
        e.self += d.data.value;
        self += d.data.value;
        e.fills.push(g.querySelector('rect').getAttribute('fill') || '');
      }
      return { by, self };
    });
    const rows = () => page.evaluate(() => [...document.querySelectorAll('#top-table tbody tr[data-fn]')].map(r => r.dataset.fn));
    const before = await flame();
    const colour = { native: /^hsl\(185,/, kernel: /^hsl\(95,/ };
    for (const [kind, names] of [['native', k.native || []], ['kernel', k.kernel || []], ['python', k.python || []]])
      for (const n of names) {
        const e = before.by[n];
        if (!e) { fail(`the flame graph has no ${kind} frame ${JSON.stringify(n)}`); continue; }
        for (const f of e.fills) {
          const ok = kind === 'python' ? !colour.native.test(f) && !colour.kernel.test(f) : colour[kind].test(f);
          if (!ok) fail(`${kind} frame ${JSON.stringify(n)} is drawn in ${f}`);
        }
      }
    for (const [boxes, want, gone] of [[['#hide-native'], k.hide_native, k.native || []],
                                       [['#hide-kernel'], k.hide_kernel, k.kernel || []],
                                       [['#hide-native', '#hide-kernel'], k.hide_both, [...(k.native || []), ...(k.kernel || [])]]]) {
      if (!want) continue;
      for (const b of boxes) {
        if (!(await page.isVisible(b))) { fail(`${b} is not shown`); continue; }
        await page.check(b);
      }
      await sleep(300);
      const after = await flame();
      const top = await rows();
      for (const n of gone) {
        if (after.by[n]) fail(`${boxes.join(' + ')}: ${JSON.stringify(n)} is still in the flame graph`);
        if (top.includes(n)) fail(`${boxes.join(' + ')}: ${JSON.stringify(n)} is still in the top table`);
      }
      for (const [n, v] of Object.entries(want))
        if (!after.by[n] || after.by[n].self !== v) fail(`${boxes.join(' + ')}: ${JSON.stringify(n)} has self ${after.by[n] ? after.by[n].self : 'none'}, want ${v}`);
      if (after.self !== before.self) fail(`${boxes.join(' + ')}: the flame graph totals ${after.self}, was ${before.self}`);
      info.push(`${boxes.join(' + ')}: ${Object.entries(want).map(([n, v]) => `${n}=${v}`).join(', ')}`);
      for (const b of boxes) await page.uncheck(b);
      await sleep(300);
      const back = await flame();
      for (const n of gone) if (!back.by[n]) fail(`${boxes.join(' + ')} unticked: ${JSON.stringify(n)} is not back`);
    }
    // The top table's File:line of native and kernel functions: the library, then the source.
    if (k.top_loc) {
      const locs = await page.evaluate(() => Object.fromEntries([...document.querySelectorAll('#top-table tbody tr[data-fn]')]
        .map(r => [r.dataset.fn, r.querySelector('td.loc').textContent])));
      for (const [n, want] of Object.entries(k.top_loc))
        if (locs[n] !== want) fail(`the top table's File:line of ${JSON.stringify(n)} is ${JSON.stringify(locs[n])}, want ${JSON.stringify(want)}`);
    }
    info.push(`kinds coloured: ${(k.native || []).length} native, ${(k.kernel || []).length} kernel`);
  }

  // Every column of every table is visible without scrolling sideways, at two window sizes;
  // a screenshot of each is kept.
  if (expect.layout) {
    for (const [w, h] of [[1400, 1000], [1000, 800]]) {
      await page.setViewportSize({ width: w, height: h });
      await sleep(700);  // the page redraws 150 ms after a resize
      const res = await page.evaluate(() => {
        const vw = document.documentElement.clientWidth;
        const out = { tables: 0, columns: 0, cells: 0, bad: [], pageScrollsX: document.documentElement.scrollWidth > vw + 1, wide: [] };
        // What sticks out on the right (the innermost elements whose box or content passes the edge).
        if (out.pageScrollsX) {
          const name = e => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') + (e.classList.length ? '.' + [...e.classList].join('.') : '');
          for (const e of document.body.querySelectorAll('*')) {
            const r = e.getBoundingClientRect();
            const right = getComputedStyle(e).overflowX === 'visible' ? Math.max(r.right, r.left + e.scrollWidth) : r.right;
            if (r.width > 0 && right > vw + 1 && ![...e.children].some(c => c.getBoundingClientRect().right > vw + 1))
              out.wide.push(`${name(e)} (${r.left.toFixed(0)}-${right.toFixed(0)})`);
          }
        }
        for (const t of document.querySelectorAll('table.data')) {
          if (!t.offsetParent || !t.tBodies[0] || !t.tBodies[0].rows.length) continue;
          const wrap = t.closest('.table-wrap');
          const wr = wrap.getBoundingClientRect();
          const right = Math.min(vw, wr.left + wrap.clientLeft + wrap.clientWidth);
          out.tables++;
          if (wrap.scrollWidth > wrap.clientWidth + 1) out.bad.push(`#${t.id} scrolls sideways (${wrap.scrollWidth} > ${wrap.clientWidth})`);
          const heads = [...t.tHead.rows[0].cells];
          heads.forEach((th, ci) => {
            out.columns++;
            const cells = [th, ...[...t.tBodies[0].rows].filter(r => r.cells.length === heads.length).map(r => r.cells[ci])];
            for (const c of cells) {
              out.cells++;
              const b = c.getBoundingClientRect();
              const clipped = c.scrollWidth > c.clientWidth + 1;
              if (b.width <= 0 || b.left < wr.left - 1 || b.right > right + 1 || clipped) {
                out.bad.push(`#${t.id} column ${JSON.stringify(th.textContent)}: ${JSON.stringify(c.textContent.slice(0, 40))} at ${b.left.toFixed(0)}-${b.right.toFixed(0)} ` +
                  `(box ${wr.left.toFixed(0)}-${right.toFixed(0)}${clipped ? ', clipped' : ''})`);
                break;
              }
            }
          });
        }
        // The title: within the width, its full text in its tooltip when cut.
        const title = document.getElementById('title-target');
        const tr = title.getBoundingClientRect();
        out.title = { right: tr.right, cut: title.scrollWidth > title.clientWidth + 1, full: title.title === title.textContent };
        return out;
      });
      if (res.title.right > w + 1) fail(`at ${w}x${h} the title reaches ${res.title.right.toFixed(0)} px`);
      if (res.title.cut && !res.title.full) fail(`at ${w}x${h} the title is cut and its tooltip does not hold its text`);
      if (res.pageScrollsX) fail(`at ${w}x${h} the page scrolls sideways: ${res.wide.slice(0, 4).join(', ')} past ${w} px`);
      for (const b of res.bad.slice(0, 6)) fail(`at ${w}x${h}: ${b}`);
      if (expect.layout.min_columns && res.columns < expect.layout.min_columns) fail(`at ${w}x${h} only ${res.columns} columns checked`);
      info.push(`${w}x${h}: ${res.tables} tables, ${res.columns} columns, ${res.cells} cells in view${res.title.cut ? ', the title cut' : ''}`);
      if (expect.layout.dir) {
        fs.mkdirSync(expect.layout.dir, { recursive: true });
        await page.evaluate(() => window.scrollTo(0, 0));
        const height = await page.evaluate(() => Math.min(4000, document.documentElement.scrollHeight));
        await page.screenshot({ path: path.join(expect.layout.dir, `report-${w}x${h}.png`), fullPage: true, clip: { x: 0, y: 0, width: w, height } });
      }
    }
    await page.setViewportSize({ width: 1400, height: 1000 });
    await sleep(700);
  }

  // The speedscope JSON download.
  const hasRaw = await page.evaluate(() => !!document.getElementById('pbp-raw'));
  if (expect.raw === true && !hasRaw) fail('no embedded speedscope JSON');
  if (hasRaw) {
    const raw = await page.evaluate(async () => {
      const doc = JSON.parse(await window.pbpReport.rawText());
      return { schema: doc.$schema, samples: doc.profiles.reduce((n, p) => n + p.samples.length, 0),
               total: doc.pybpfprof ? doc.pybpfprof.total_samples : undefined };
    });
    if (raw.schema !== 'https://www.speedscope.app/file-format-schema.json') fail(`raw data $schema is ${raw.schema}`);
    // A run longer than its sample window has buckets (expect.buckets): an entry stands for
    // several samples, and the metadata's total_samples is what was taken.
    if (expect.buckets ? raw.samples >= run.samples : raw.samples !== run.samples)
      fail(`raw data holds ${raw.samples} samples, the run ${run.samples}`);
    if (raw.total !== run.samples) fail(`raw data says ${raw.total} samples taken, the run ${run.samples}`);
    info.push(`speedscope JSON unpacks (${raw.samples} samples)`);
  }
}

try {
  await main();
  if (screenshot) {
    await sleep(400);
    fs.mkdirSync(path.dirname(path.resolve(screenshot)), { recursive: true });
    // The top of the page (summary, timeline, flame graph, tables, charts).
    await page.evaluate(() => window.scrollTo(0, 0));
    const height = await page.evaluate(() => Math.min(2100, document.documentElement.scrollHeight));
    await page.screenshot({ path: screenshot, fullPage: true, clip: { x: 0, y: 0, width: 1400, height } });
  }
} catch (e) {
  fail(`browser: ${String(e.message).split('\n')[0]}`);
}
await browser.close().catch(() => {});
if (failures.length) {
  console.log(`FAIL ${file}: ${[...new Set(failures)].join('; ')}`);
  process.exit(1);
}
console.log(`ok ${file}: ${info.join(', ')}`);
process.exit(0);
