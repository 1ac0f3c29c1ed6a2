#!/usr/bin/env node
// Checks profiles with their real consumer, offline:
//   (a) speedscope JSON files are validated against the JSON schema shipped in the pinned
//       speedscope package (node_modules/speedscope/dist/release/file-format-schema.json);
//   (b) every file is loaded into the real speedscope app (dist/release/index.html) in
//       headless Chromium, the same way `speedscope <file>` does (a JS file calling
//       speedscope.loadFileFromBase64, opened via #localProfilePath=...).
// A file passes when the page title becomes "<name> - speedscope", the app shows the
// profile, and there is no "Something went wrong", no "Failed to load format", no alert,
// no console error, no page error and no request other than file:/data:/blob:.
//
// With --expect-frame [INDEX:]NAME (repeatable) the app must show the function NAME: in
// profile INDEX (default: the one it opens with) the sandwich view, searched (Ctrl+F) for NAME, lists
// it as a row of its table.
//
// Usage: node check_speedscope.mjs [--screenshot-dir DIR] [--timeout-ms N] [--expect-frame [I:]NAME] FILE...
//   FILE ending in .folded/.collapsed/.txt is loaded as collapsed stacks (app check only);
//   any other FILE must be speedscope JSON.
// Prints one line per file ("ok FILE: ..." / "FAIL FILE: ..."); exits 1 if any failed,
// 2 on usage or environment errors.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(import.meta.url);
const CHROMIUM = process.env.PBP_CHROMIUM || '/usr/bin/chromium';
const releaseDir = path.join(here, 'node_modules', 'speedscope', 'dist', 'release');
const SCHEMA_URL = 'https://www.speedscope.app/file-format-schema.json';

function usage(msg) {
  if (msg) console.error(`check_speedscope: ${msg}`);
  console.error('usage: node check_speedscope.mjs [--screenshot-dir DIR] [--timeout-ms N] FILE...');
  process.exit(2);
}

const files = [];
let screenshotDir = null;
let timeoutMs = 30000;
const expectFrames = [];
for (let i = 2; i < process.argv.length; i++) {
  const a = process.argv[i];
  if (a === '--screenshot-dir') screenshotDir = process.argv[++i];
  else if (a === '--expect-frame') {
    const v = process.argv[++i] || '';
    const m = /^(\d+):(.+)$/.exec(v);
    expectFrames.push(m ? { index: Number(m[1]), name: m[2] } : { index: null, name: v });
  }
  else if (a === '--timeout-ms') timeoutMs = Number(process.argv[++i]);
  else if (a === '-h' || a === '--help') usage();
  else if (a.startsWith('--')) usage(`unknown option ${a}`);
  else files.push(a);
}
if (files.length === 0) usage('no files given');
if (!fs.existsSync(path.join(releaseDir, 'index.html')))
  usage(`speedscope app not found in ${releaseDir}: run "npm ci" in ${here}`);
if (!fs.existsSync(CHROMIUM)) usage(`${CHROMIUM} not found: apt-get install -y chromium`);

let Ajv, chromium;
try {
  Ajv = require('ajv');
  Ajv = Ajv.default || Ajv;
  ({ chromium } = require('playwright-core'));
} catch (e) {
  usage(`missing node modules (${e.message}): run "npm ci" in ${here}`);
}

const schema = JSON.parse(fs.readFileSync(path.join(releaseDir, 'file-format-schema.json'), 'utf8'));
// The schema is draft-07 with "title" annotations only; strict mode stays on to catch
// anything the validator would otherwise silently ignore.
const validate = new Ajv({ allErrors: true, strict: true }).compile(schema);

const speedscopeVersion = JSON.parse(
  fs.readFileSync(path.join(here, 'node_modules', 'speedscope', 'package.json'), 'utf8')).version;

const isFolded = f => /\.(folded|collapsed|txt)$/.test(f);

// Static checks; returns {errors, expectedTitle, summary}.
function staticCheck(file, buf, loadName) {
  const errors = [];
  if (isFolded(file)) {
    const text = buf.toString('utf8');
    let n = 0, lines = 0;
    for (const line of text.split('\n')) {
      if (line === '') continue;
      // pybpfprof states the unit of a weighted file in a first comment line, which every
      // folded reader skips (it does not end in " COUNT"); the app gets the file as it is.
      if (lines === 0 && line.startsWith('# ') && !/ \d+$/.test(line)) continue;
      const m = /^(.+) (\d+)$/.exec(line);
      if (!m) { errors.push(`not "stack COUNT": ${JSON.stringify(line.slice(0, 80))}`); break; }
      n += Number(m[2]);
      lines++;
    }
    // speedscope names a profile group without a name of its own after the file.
    return { errors, expectedTitle: loadName, summary: `folded, ${lines} stacks, ${n} samples`, empty: lines === 0 };
  }
  let doc;
  try {
    doc = JSON.parse(buf.toString('utf8'));
  } catch (e) {
    return { errors: [`not JSON: ${e.message}`] };
  }
  if (!validate(doc)) {
    for (const e of validate.errors.slice(0, 5)) errors.push(`schema: ${e.instancePath || '/'} ${e.message}`);
  }
  if (doc.$schema !== SCHEMA_URL) errors.push(`$schema is not ${SCHEMA_URL}`);
  const profiles = Array.isArray(doc.profiles) ? doc.profiles : [];
  if (profiles.length === 0) errors.push('no profiles (speedscope says "it\'s empty!")');
  let samples = 0;
  for (const p of profiles) if (Array.isArray(p.samples)) samples += p.samples.length;
  // What the app shows as the title: importSpeedscopeProfiles -> name || profiles[0].name || "profile".
  const expectedTitle = doc.name || (profiles[0] && profiles[0].name) || 'profile';
  const activeIndex = Math.min(Math.max(doc.activeProfileIndex || 0, 0), Math.max(profiles.length - 1, 0));
  return {
    errors,
    expectedTitle,
    profileNames: profiles.map(p => String(p.name)),
    activeIndex,
    summary: `${profiles.length} profiles, ${samples} samples, ${(doc.shared?.frames || []).length} frames`,
  };
}

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'pbp-speedscope-check-'));
const userDataDir = path.join(tmp, 'chromium-profile');
fs.mkdirSync(userDataDir);

let context;
try {
  context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--headless', '--no-sandbox', '--disable-gpu', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
      '--allow-file-access-from-files',
    ],
    viewport: { width: 1280, height: 800 },
  });
} catch (e) {
  console.error(`check_speedscope: cannot start ${CHROMIUM}: ${e.message}`);
  fs.rmSync(tmp, { recursive: true, force: true });
  process.exit(2);
}

const MAX_VISITED_PROFILES = 40;

// Toolbar text for profile i of n: "<name> (i+1/n)", or just the name for a single profile.
async function waitForToolbar(page, names, i, deadline) {
  const norm = t => t.replace(/\s+/g, ' ').trim();
  const want = norm(names.length > 1 ? `${names[i]} (${i + 1}/${names.length})` : names[i]);
  return page.waitForFunction(
    w => document.body && document.body.innerText.replace(/\s+/g, ' ').includes(w), want,
    { timeout: Math.max(2000, deadline - Date.now()) }).then(() => null, () => want);
}

// Switches views on the active profile (1 time order, 2 left heavy, 3 sandwich) and walks
// the profiles with p/n, so every visited profile is rendered at least once.
async function exercise(page, expect, failures, deadline) {
  const names = expect.profileNames;
  if (!names || names.length === 0) return;
  const bad = await waitForToolbar(page, names, expect.activeIndex, deadline);
  if (bad) { failures.push(`toolbar does not show active profile ${JSON.stringify(bad)}`); return; }
  for (const key of ['2', '3', '1']) {
    await page.keyboard.press(key);
    await page.waitForTimeout(150);
    if (failures.length) return;
  }
  if (names.length === 1) return;
  for (let i = expect.activeIndex; i > 0; i--) await page.keyboard.press('p');
  const visit = Math.min(names.length, MAX_VISITED_PROFILES);
  for (let i = 0; i < visit; i++) {
    if (i > 0) await page.keyboard.press('n');
    const miss = await waitForToolbar(page, names, i, deadline);
    if (miss) { failures.push(`toolbar does not show profile ${JSON.stringify(miss)}`); return; }
    if (failures.length) return;
  }
}

// The sandwich view of profile index, filtered for each expected name, lists it. exercise()
// left the app on the last profile it visited.
async function showFrames(page, expect, failures, deadline, shown) {
  const names = expect.profileNames || [];
  let at = names.length > 1 ? Math.min(names.length, MAX_VISITED_PROFILES) - 1 : 0;
  for (const f of expectFrames) {
    const want = f.index === null ? expect.activeIndex : f.index;
    if (want >= names.length) { failures.push(`--expect-frame ${f.name}: there is no profile ${want}`); return; }
    while (at > want) { await page.keyboard.press('p'); at--; }
    while (at < want) { await page.keyboard.press('n'); at++; }
    const miss = await waitForToolbar(page, names, want, deadline);
    if (miss) { failures.push(`toolbar does not show profile ${JSON.stringify(miss)}`); return; }
    // The sandwich view, then its search box (Ctrl+F); a key pressed while the view is still
    // being drawn can be missed, so a few tries.
    const input = page.locator('input:not([type="file"]):not([placeholder])').first();  // the search box (class names are hashed)
    let open = false;
    for (let attempt = 0; attempt < 5 && !open; attempt++) {
      await page.keyboard.press('3');
      await page.waitForTimeout(300 + 200 * attempt);
      await page.keyboard.press('Control+f');
      open = await input.waitFor({ timeout: 2000 }).then(() => true, () => false);
    }
    if (!open) {
      failures.push('Ctrl+F opens no search box in the sandwich view');
      return;
    }
    await input.fill(f.name);
    const ok = await page.waitForFunction(n => document.body.innerText.split('\n').some(l => l.trim() === n), f.name,
      { timeout: Math.max(2000, deadline - Date.now()) }).then(() => true, () => false);
    if (!ok) failures.push(`the sandwich view of profile ${want} (${names[want]}) does not list ${JSON.stringify(f.name)}`);
    else shown.push(`${f.name} in profile ${want}`);
    await input.fill('');
    await page.keyboard.press('Escape');
  }
}

async function checkInApp(file, buf, loadName, expect, shown = []) {
  const failures = [];
  const jsPath = path.join(tmp, `load-${Math.random().toString(36).slice(2)}.js`);
  fs.writeFileSync(jsPath,
    `speedscope.loadFileFromBase64(${JSON.stringify(loadName)}, ${JSON.stringify(buf.toString('base64'))})`);
  const page = await context.newPage();
  page.on('console', msg => {
    const text = msg.text().split('\n')[0];
    if (msg.type() === 'error') failures.push(`console error: ${text}`);
    else if (text.includes('Failed to load format')) failures.push(`console: ${text}`);
  });
  page.on('pageerror', err => failures.push(`page error: ${String(err.message).split('\n')[0]}`));
  page.on('dialog', async d => {
    failures.push(`alert: ${d.message()}`);
    await d.dismiss().catch(() => {});
  });
  page.on('request', req => {
    const u = req.url();
    if (!/^(file|data|blob):/.test(u)) failures.push(`network request: ${u}`);
  });
  const url = `file://${path.join(releaseDir, 'index.html')}#localProfilePath=${jsPath}`;
  // document.title strips and collapses ASCII whitespace (a command line's newlines, in a name).
  const want = `${expect.expectedTitle} - speedscope`.replace(/[\t\n\f\r ]+/g, ' ').trim();
  let title = '';
  try {
    await page.goto(url, { waitUntil: 'load' });
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      title = await page.title();
      const body = await page.evaluate(() => document.body ? document.body.innerText : '');
      if (body.includes('Something went wrong')) { failures.push('app shows "Something went wrong"'); break; }
      if (failures.length) break;
      if (title === want) {
        // The title is set just before the profile group is rendered: let it render, then
        // drive the app like a user and require the toolbar to show each profile's name.
        await page.waitForTimeout(300);
        await exercise(page, expect, failures, deadline);
        if (!failures.length) await showFrames(page, expect, failures, deadline, shown);
        const canvases = await page.evaluate(() => document.querySelectorAll('canvas').length);
        if (canvases === 0) failures.push('no canvas rendered');
        const body2 = await page.evaluate(() => document.body.innerText);
        if (body2.includes('Something went wrong')) failures.push('app shows "Something went wrong"');
        break;
      }
      if (Date.now() > deadline) {
        failures.push(`timeout: title is ${JSON.stringify(title)}, want ${JSON.stringify(want)}`);
        break;
      }
      await page.waitForTimeout(100);
    }
    if (screenshotDir) {
      fs.mkdirSync(screenshotDir, { recursive: true });
      await page.screenshot({ path: path.join(screenshotDir, `${path.basename(file)}.png`) });
    }
  } catch (e) {
    failures.push(`browser: ${String(e.message).split('\n')[0]}`);
  } finally {
    await page.close().catch(() => {});
  }
  return failures;
}

let failed = 0;
for (let i = 0; i < files.length; i++) {
  const file = files[i];
  let buf;
  try {
    buf = fs.readFileSync(file);
  } catch (e) {
    console.log(`FAIL ${file}: ${e.message}`);
    failed++;
    continue;
  }
  // A neutral name: one ending in .speedscope.json would skip speedscope's $schema check.
  const loadName = isFolded(file) ? `input-${i}.txt` : `input-${i}.json`;
  const expect = staticCheck(file, buf, loadName);
  const errors = [...expect.errors];
  const shown = [];
  if (expect.expectedTitle !== undefined && !expect.empty) errors.push(...await checkInApp(file, buf, loadName, expect, shown));
  else if (expect.empty) errors.push('empty folded file: nothing for speedscope to show');
  if (errors.length) {
    failed++;
    console.log(`FAIL ${file}: ${errors.join('; ')}`);
  } else {
    const what = isFolded(file) ? 'parsed' : 'schema ok';
    console.log(`ok ${file}: ${what}, loaded in speedscope ${speedscopeVersion} as ${JSON.stringify(expect.expectedTitle)} (${expect.summary})` +
      (shown.length ? `; the app shows ${shown.join(', ')}` : ''));
  }
}

await context.close().catch(() => {});
fs.rmSync(tmp, { recursive: true, force: true });
process.exit(failed ? 1 : 0);
