#!/usr/bin/env node
// Checks a pybpfprof SVG flame graph in its real consumer, a browser (headless Chromium via
// playwright-core), offline, the way a person uses it:
//   - it loads from file:// with no page error, no console error, no dialog other than the
//     search prompt, and no request other than file: or data: (anything else is blocked and
//     fails the check);
//   - the function's label is visible: the <text> of a frame whose label starts with it
//     shows it (not cut away) and lies inside its rectangle;
//   - clicking that frame (a real mouse click on it) zooms it to the full width, hides the
//     frames beside it, and "Reset Zoom" puts every frame back;
//   - the Search button asks for a term (window.prompt, answered with EXPECT.search), then
//     exactly the frames whose label matches the term (a JavaScript regular expression) are
//     painted magenta and "Matched: N%" shows; Escape clears it; Ctrl-F asks again and
//     highlights the same frames.
//
// Usage: node check_svg.mjs [--screenshot FILE] [--timeout-ms N] FLAME.svg EXPECT.json
//   EXPECT: {"function": "two_loops" (a label prefix that must be visible and is clicked),
//            "search": "two_loops" (the search term; default: the function)}
// Prints "ok FILE: ..." or "FAIL FILE: ..."; exits 1 on failure, 2 on usage/environment errors.
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const CHROMIUM = process.env.PBP_CHROMIUM || '/usr/bin/chromium';
const MATCH_FILL = 'rgb(230,0,230)';

function usage(msg) {
  if (msg) console.error(`check_svg: ${msg}`);
  console.error('usage: node check_svg.mjs [--screenshot FILE] [--timeout-ms N] FLAME.svg EXPECT.json');
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
if (pos.length !== 2) usage('give one SVG file and one expectations file');
const file = path.resolve(pos[0]);
if (!fs.existsSync(file)) usage(`${file} does not exist`);
let expect;
try { expect = JSON.parse(fs.readFileSync(pos[1], 'utf8')); } catch (e) { usage(`bad expectations ${pos[1]}: ${e.message}`); }
if (typeof expect.function !== 'string' || !expect.function) usage('EXPECT.function must be a non-empty string');
const term = typeof expect.search === 'string' && expect.search ? expect.search : expect.function;
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
  console.error(`check_svg: cannot start ${CHROMIUM}: ${e.message}`);
  process.exit(2);
}
const context = await browser.newContext({ viewport: { width: 1300, height: 900 } });
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
let prompts = 0;
page.on('dialog', d => {
  if (d.type() === 'prompt') { prompts++; d.accept(term).catch(() => {}); return; }
  fail(`unexpected ${d.type()} dialog: ${d.message()}`);
  d.dismiss().catch(() => {});
});

// Every frame as the page shows it: label (from its <title>), drawn text, geometry, fill,
// and whether it is displayed.
const frames = () => page.evaluate(() => [...document.querySelectorAll('#frames > g')].map((g, i) => {
  const r = g.querySelector('rect'), t = g.querySelector('text'), title = g.querySelector('title').textContent;
  const shown = getComputedStyle(g).display !== 'none';
  const rb = r.getBoundingClientRect(), tb = shown && t.textContent ? t.getBBox() : null;
  return {
    i, label: title.split('\n')[0], text: t.textContent, shown,
    x: +r.getAttribute('x'), w: +r.getAttribute('width'), fill: r.getAttribute('fill'),
    client: { x: rb.x, y: rb.y, w: rb.width, h: rb.height },
    textBox: tb && { x: tb.x, w: tb.width },
  };
}));
const visible = el => page.evaluate(id => {
  const e = document.getElementById(id);
  return !!e && getComputedStyle(e).display !== 'none' && e.getBoundingClientRect().width > 0;
}, el);
const clickId = async id => {
  const b = await page.evaluate(i => { const r = document.getElementById(i).getBoundingClientRect(); return { x: r.x + r.width / 2, y: r.y + r.height / 2 }; }, id);
  await page.mouse.click(b.x, b.y);
};
const matches = label => { try { return new RegExp(term).test(label); } catch (e) { return label.includes(term); } };

async function checkSearch(how) {
  const fs2 = await frames();
  const want = fs2.filter(f => matches(f.label)).map(f => f.i);
  const lit = fs2.filter(f => f.fill === MATCH_FILL).map(f => f.i);
  if (want.length === 0) { fail(`${how}: no frame label matches ${JSON.stringify(term)}`); return; }
  const missing = want.filter(i => !lit.includes(i)), extra = lit.filter(i => !want.includes(i));
  if (missing.length) fail(`${how}: ${missing.length} matching frames not highlighted, e.g. ${JSON.stringify(fs2[missing[0]].label)}`);
  if (extra.length) fail(`${how}: ${extra.length} frames highlighted that do not match, e.g. ${JSON.stringify(fs2[extra[0]].label)}`);
  const matched = await page.evaluate(() => document.getElementById('matched').textContent);
  const m = /^Matched: ([\d.]+)%/.exec(matched);
  if (!m || !(Number(m[1]) > 0)) fail(`${how}: "Matched" shows ${JSON.stringify(matched)}`);
  else info.push(`${how} highlighted ${lit.length} frames (${matched})`);
}

async function main() {
  await page.goto('file://' + file, { waitUntil: 'load', timeout: timeoutMs });
  const ready = await page.waitForFunction(() => window.pbpFlame && window.pbpFlame.ready, null, { timeout: timeoutMs })
    .then(() => true, () => false);
  if (!ready) { fail('the page never became ready (window.pbpFlame.ready)'); return; }
  const before = await frames();
  info.push(`${before.length} frames`);
  // The function's label, visible: the widest frame of it shows its label (whole or cut
  // with "..", but showing the name) inside its rectangle.
  const mine = before.filter(f => f.label.startsWith(expect.function)).sort((a, b) => b.w - a.w);
  if (mine.length === 0) { fail(`no frame of ${JSON.stringify(expect.function)}`); return; }
  const top = mine[0];
  if (!top.shown || !top.text.startsWith(expect.function))
    fail(`the label of ${JSON.stringify(top.label)} is not visible (drawn: ${JSON.stringify(top.text)})`);
  else if (!top.textBox || top.textBox.w <= 0 || top.textBox.x < top.x - 0.5 || top.textBox.x + top.textBox.w > top.x + top.w + 0.5)
    fail(`the label of ${JSON.stringify(top.label)} does not lie inside its frame: ${JSON.stringify(top.textBox)} in x=${top.x} w=${top.w}`);
  else info.push(`label ${JSON.stringify(top.text)} visible`);

  // Zoom: a real click in the middle of its rectangle.
  const all = before[0];
  await page.mouse.click(top.client.x + top.client.w / 2, top.client.y + top.client.h / 2);
  const zoomed = await frames();
  const z = zoomed[top.i];
  if (Math.abs(z.x - all.x) > 0.01 || Math.abs(z.w - all.w) > 0.01)
    fail(`after a click, ${JSON.stringify(top.label)} spans x=${z.x} w=${z.w}, not the full width x=${all.x} w=${all.w}`);
  else if (Math.abs(z.client.w - before[0].client.w) > 1)
    fail(`after a click, ${JSON.stringify(top.label)} is ${z.client.w} px wide on screen, not ${before[0].client.w}`);
  else info.push(`click zooms ${JSON.stringify(top.label)} to the full width`);
  if (!z.text.startsWith(expect.function)) fail(`zoomed, its label shows ${JSON.stringify(z.text)}`);
  // A frame entirely beside it (neither below nor above it) is hidden.
  const beside = before.filter(f => f.x + f.w <= top.x + 0.005 || f.x >= top.x + top.w - 0.005);
  const stillShown = beside.filter(f => zoomed[f.i].shown);
  if (stillShown.length) fail(`zoomed, ${stillShown.length} frames beside it are still shown, e.g. ${JSON.stringify(stillShown[0].label)}`);
  else info.push(`${beside.length} frames beside it hidden`);
  if (!await visible('unzoom')) fail('zoomed, "Reset Zoom" is not shown');
  else {
    await clickId('unzoom');
    const back = await frames();
    const moved = back.filter((f, k) => !f.shown || Math.abs(f.x - before[k].x) > 0.01 || Math.abs(f.w - before[k].w) > 0.01);
    if (moved.length) fail(`"Reset Zoom" left ${moved.length} frames out of place, e.g. ${JSON.stringify(moved[0].label)}`);
    if (await visible('unzoom')) fail('"Reset Zoom" is still shown after a reset');
  }

  // Search with the button, then clear it with Escape, then search with Ctrl-F.
  await clickId('search');
  if (prompts !== 1) fail(`the Search button asked ${prompts} times, not once`);
  await checkSearch('Search');
  if (!await visible('unsearch')) fail('"Reset Search" is not shown during a search');
  await page.keyboard.press('Escape');
  const cleared = await frames();
  if (cleared.some(f => f.fill === MATCH_FILL)) fail('Escape left frames highlighted');
  await page.keyboard.press('Control+f');
  if (prompts !== 2) fail(`Ctrl-F did not ask for a term (${prompts} prompts)`);
  await checkSearch('Ctrl-F');
  if (screenshot) await page.screenshot({ path: screenshot, timeout: 15000 });
}

try {
  await main();
} catch (e) {
  fail(`browser: ${String(e.message).split('\n')[0]}`);
}
await browser.close().catch(() => {});
if (failures.length) {
  console.log(`FAIL ${file}: ${failures.join('; ')}`);
  process.exit(1);
}
console.log(`ok ${file}: ${info.join('; ')}`);
process.exit(0);
