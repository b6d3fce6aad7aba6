// Peregrine admin UI: plain JavaScript, no framework, no build step. Every figure comes from the
// admin API (issue 14's contract); a view whose endpoint this server lacks (404) says so.
'use strict';

const $ = (id) => document.getElementById(id);

// ---- Session: the cookie from POST /api/login, or a bearer token kept for this tab only. ----

const TOKEN_KEY = 'peregrine-admin-token';
const session = { token: sessionStorage.getItem(TOKEN_KEY) || '', ok: false };

class ApiError extends Error {
  constructor(status, message, body) {
    super(message);
    this.status = status;
    this.body = body;
  }
}

async function api(path, { method = 'GET', body, headers = {}, raw = false } = {}) {
  const h = { ...headers };
  if (session.token) h.Authorization = 'Bearer ' + session.token;
  if (typeof body === 'object' && body !== null) {
    body = JSON.stringify(body);
    h['Content-Type'] = 'application/json';
  }
  const response = await fetch(path, { method, body, headers: h, credentials: 'same-origin', cache: 'no-store' });
  if (raw) return response;
  const text = await response.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch (e) { data = null; }
  if (!response.ok) {
    const message = (data && data.error) || text.trim() || response.statusText;
    if (response.status === 401 && session.ok) loggedOut('Your session ended: log in again.');
    throw new ApiError(response.status, message, data || text);
  }
  return data === null ? text : data;
}

function say(text, isError = false) {
  const s = $('status');
  s.textContent = text;
  s.classList.toggle('error', isError);
}

// Shows, in a view's notice, that an endpoint is missing (404) or failed; hides it when ok.
function notice(id, error) {
  const n = $(id);
  if (!error) { n.hidden = true; return; }
  n.hidden = false;
  n.classList.toggle('error', error.status !== 404);
  n.textContent = error.status === 404
    ? `This server does not offer ${error.path || 'this endpoint'} (404): this view needs a Peregrine with the full admin API.`
    : `Error ${error.status || ''}: ${error.message}`;
}

function missing(error, path) {
  if (error instanceof ApiError) error.path = path;
  return error;
}

// GET `path` for a view: its data, or null once `noticeId` says why and `clear` emptied the view.
async function viewData(path, noticeId, clear) {
  try {
    const data = await api(path);
    notice(noticeId, null);
    return data;
  } catch (e) {
    notice(noticeId, missing(e, path));
    clear();
    return null;
  }
}

async function login(kind, secret) {
  // A token also goes as a bearer credential: a server without /api/login then answers 404 (not
  // 401), and the token is kept for this tab instead of a cookie.
  const headers = kind === 'token' ? { Authorization: 'Bearer ' + secret } : {};
  let status = 0;
  try {
    status = (await api('/api/login', { method: 'POST', body: { [kind]: secret }, headers, raw: true })).status;
  } catch (e) {
    throw new Error(`Cannot reach the admin API: ${e.message}`);
  }
  if (status === 204 || status === 200) {
    session.token = '';
    sessionStorage.removeItem(TOKEN_KEY);
    return;
  }
  if (status === 404 && kind === 'token') {
    session.token = secret;
    try {
      await api('/api/status');
      sessionStorage.setItem(TOKEN_KEY, secret);
      return;
    } catch (e) {
      session.token = '';
      throw new Error(e.status === 401 ? 'Wrong credentials.' : `Cannot log in: ${e.message}`);
    }
  }
  if (status === 404) throw new Error('This server has no password login: use the token.');
  if (status === 429) throw new Error('Too many attempts: wait, then try again.');
  if (status === 401 || status === 403) throw new Error('Wrong credentials.');
  throw new Error(`Cannot log in (HTTP ${status}).`);
}

async function logout() {
  try { await api('/api/logout', { method: 'POST', raw: true }); } catch (e) { /* best effort */ }
  session.token = '';
  sessionStorage.removeItem(TOKEN_KEY);
  loggedOut('Logged out.');
}

function loggedOut(message) {
  session.ok = false;
  stopLogs();
  $('tabs').hidden = true;
  $('logout').hidden = true;
  if (message) say(message, false);
  location.hash = '#login';
  route();
}

async function loggedIn() {
  session.ok = true;
  $('tabs').hidden = false;
  $('logout').hidden = false;
  try {
    const status = await api('/api/status');
    $('server-version').textContent = `${status.version} · ${status.workers} worker${status.workers === 1 ? '' : 's'}`;
  } catch (e) { /* the dashboard says why */ }
  startPolling();
  if (!location.hash || location.hash === '#login') location.hash = '#dashboard';
  else route();
}

// ---- Hash routing: one section per view, the tab of the current one marked. ----

const VIEWS = ['login', 'dashboard', 'upstreams', 'routes', 'config', 'logs'];
let currentView = '';

function route() {
  let view = location.hash.replace(/^#/, '') || 'dashboard';
  if (!VIEWS.includes(view)) view = 'dashboard';
  if (!session.ok) view = 'login';
  const changed = view !== currentView;
  currentView = view;
  for (const v of VIEWS) {
    $('view-' + v).hidden = v !== view;
    const tab = $('tab-' + v);
    if (tab) {
      if (v === view) tab.setAttribute('aria-current', 'page');
      else tab.removeAttribute('aria-current');
    }
  }
  if (!changed) return;
  document.title = `Peregrine admin – ${view}`;
  if (view === 'login') $('login-secret').focus();
  if (view === 'upstreams') refreshUpstreams();
  if (view === 'routes') loadRoutes();
  if (view === 'config') loadConfig();
  if (view === 'logs') startLogs();
  else stopLogs();
}

// ---- Formatting ----

function num(n) { return n === null || n === undefined ? '–' : Number(n).toLocaleString('en'); }
function rate(n) { return n === null || !isFinite(n) ? '–' : n < 10 ? n.toFixed(1) : Math.round(n).toLocaleString('en'); }
function seconds(s) {
  if (s === null || s === undefined || !isFinite(s)) return '–';
  if (s < 0.001) return `${Math.round(s * 1e6)} µs`;
  if (s < 1) return `${(s * 1000).toFixed(s < 0.01 ? 2 : 1)} ms`;
  return `${s.toFixed(2)} s`;
}
function bytes(n) {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; ++i; }
  return `${i ? n.toFixed(1) : n} ${units[i]}`;
}
function time(t) { return t ? new Date(t * 1000).toLocaleString() : '–'; }

function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children) if (c !== null && c !== undefined) e.append(c instanceof Node ? c : String(c));
  return e;
}

const SVG = 'http://www.w3.org/2000/svg';
function svg(tag, attrs = {}) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  return e;
}

// ---- Dashboard: /api/stats every second; rates and window quantiles from successive reads. ----

const HISTORY = 60;
const series = { rps: [], p99: [], conns: [] };
let previous = null;
let pollTimer = 0;

// The q-quantile of a histogram given as [{le_seconds, count}] (/api/stats lists the non-empty
// buckets, each with its own count, not cumulative), as the upper edge of the bucket holding it;
// null for an empty histogram.
function quantile(buckets, q) {
  const total = buckets.reduce((a, b) => a + b.count, 0);
  if (total <= 0) return null;
  const rank = q * total;
  let seen = 0;
  for (const b of buckets) {
    seen += b.count;
    if (seen >= rank) return b.le_seconds;
  }
  return buckets[buckets.length - 1].le_seconds;
}

function bucketDelta(now, before) {
  const old = new Map(before.map((b) => [b.le_seconds, b.count]));
  return now.map((b) => ({ le_seconds: b.le_seconds, count: Math.max(0, b.count - (old.get(b.le_seconds) || 0)) }));
}

function statusClasses(stats) {
  const classes = { '1xx': 0, '2xx': 0, '3xx': 0, '4xx': 0, '5xx': 0 };
  for (const r of stats.routes || [])
    for (const x of r.requests || []) classes[x.code] = (classes[x.code] || 0) + x.count;
  return classes;
}

function sites(stats) {
  const out = new Map();
  for (const r of stats.routes || []) {
    const s = out.get(r.site) || { requests: 0, bytes: 0, '2xx': 0, '3xx': 0, '4xx': 0, '5xx': 0 };
    s.requests += r.requests_total || 0;
    s.bytes += r.response_body_bytes || 0;
    for (const x of r.requests || []) s[x.code] = (s[x.code] || 0) + x.count;
    out.set(r.site, s);
  }
  return out;
}

function openConnections(stats) {
  const open = (stats.connections && stats.connections.open) || {};
  return Object.values(open).reduce((a, b) => a + b, 0);
}

function push(list, value) {
  list.push(value);
  while (list.length > HISTORY) list.shift();
}

async function pollStats() {
  if (!session.ok) return;
  let stats;
  try {
    stats = await api('/api/stats');
  } catch (e) {
    if (e.status !== 401) say(`Cannot read /api/stats: ${e.message}`, true);
    return;
  }
  const now = performance.now();
  const buckets = ((stats.duration && stats.duration.buckets) || []).slice().sort((a, b) => a.le_seconds - b.le_seconds);
  const current = { at: now, stats, buckets, classes: statusClasses(stats), sites: sites(stats) };
  let rps = null, p50 = null, p99 = null;
  if (previous) {
    const dt = (now - previous.at) / 1000;
    rps = Math.max(0, (stats.requests_total - previous.stats.requests_total) / dt);
    // Latency of the last second's requests, from the histogram's growth; the figures since
    // start (p50_seconds, p99_seconds) when nothing was answered in that second.
    const window = bucketDelta(buckets, previous.buckets);
    p50 = quantile(window, 0.5);
    p99 = quantile(window, 0.99);
  }
  if (p50 === null && stats.duration) { p50 = stats.duration.p50_seconds; p99 = stats.duration.p99_seconds; }
  const conns = openConnections(stats);
  push(series.rps, rps || 0);
  push(series.p99, (p99 || 0) * 1000);
  push(series.conns, conns);
  renderDashboard(current, previous, { rps, p50, p99, conns });
  previous = current;
  if (currentView === 'upstreams' && ++upstreamTick % 2 === 0) refreshUpstreams();
}

function renderDashboard(current, before, f) {
  const s = current.stats;
  $('rps').textContent = rate(f.rps);
  $('p50').textContent = seconds(f.p50);
  $('p99').textContent = seconds(f.p99);
  $('conns').textContent = num(f.conns);
  const c = s.connections || {};
  $('conn-states').textContent = `reading ${num(c.reading)} · writing ${num(c.writing)} · idle ${num(c.idle)}`;
  $('total').textContent = num(s.requests_total);
  const dt = before ? (current.at - before.at) / 1000 : 0;

  const classes = $('classes-table').tBodies[0];
  classes.replaceChildren(...Object.entries(current.classes).map(([k, v]) => el('tr', {},
    el('th', { scope: 'row' }, k), el('td', {}, num(v)),
    el('td', {}, before ? rate((v - (before.classes[k] || 0)) / dt) : '–'))));

  const rows = [];
  for (const [name, site] of [...current.sites].sort((a, b) => a[0].localeCompare(b[0]))) {
    const old = before && before.sites.get(name);
    rows.push(el('tr', {}, el('th', { scope: 'row' }, name), el('td', {}, num(site.requests)),
      el('td', {}, old ? rate((site.requests - old.requests) / dt) : '–'),
      el('td', {}, num(site['2xx'])), el('td', {}, num(site['3xx'])), el('td', {}, num(site['4xx'])),
      el('td', {}, num(site['5xx'])), el('td', {}, bytes(site.bytes))));
  }
  $('sites-table').tBodies[0].replaceChildren(...rows);
  const p = s.process || {};
  $('process-line').textContent = `uptime ${num(s.uptime_seconds)} s · generation ${num(s.generation)} · ` +
    `RSS ${p.resident_memory_bytes ? bytes(p.resident_memory_bytes) : '–'} · open fds ${num(p.open_fds)} · ` +
    `access-log lines dropped ${num(s.access_log_dropped_lines)}`;

  chart($('chart-rps'), series.rps, $('max-rps'), rate);
  chart($('chart-p99'), series.p99, $('max-p99'), (v) => v.toFixed(2));
  chart($('chart-conns'), series.conns, $('max-conns'), num);
}

// A line chart of the last HISTORY values, scaled to its maximum, in a 300x80 viewBox.
function chart(target, values, label, format) {
  const max = Math.max(1e-9, ...values);
  const step = 300 / (HISTORY - 1);
  const x0 = 300 - (values.length - 1) * step;
  const points = values.map((v, i) => `${(x0 + i * step).toFixed(1)},${(78 - (v / max) * 74).toFixed(1)}`);
  const nodes = [svg('line', { class: 'grid', x1: 0, y1: 78, x2: 300, y2: 78 }),
    svg('line', { class: 'grid', x1: 0, y1: 41, x2: 300, y2: 41 })];
  if (points.length > 1) {
    nodes.push(svg('polygon', { class: 'area', points: `${x0},78 ${points.join(' ')} 300,78` }));
    nodes.push(svg('polyline', { class: 'series', points: points.join(' ') }));
  }
  target.replaceChildren(...nodes);
  label.textContent = `(max ${format(Math.max(0, ...values))})`;
}

function startPolling() {
  clearInterval(pollTimer);
  pollStats();
  pollTimer = setInterval(pollStats, 1000);
}

// ---- Upstreams ----

let upstreamTick = 0;

async function refreshUpstreams() {
  const data = await viewData('/api/upstreams', 'upstreams-missing', () => $('upstreams-list').replaceChildren());
  if (!data) return;
  // Keep keyboard focus on the same button across the redraw.
  const focused = document.activeElement && document.activeElement.dataset.key;
  const groups = (data.upstreams || []).map((g) => {
    const rows = (g.servers || []).map((s) => {
      const check = s.last_check || {};
      const manual = s.state === 'drained' || s.state === 'disabled';
      const actions = ['drain', 'disable', 'enable'].map((a) => el('button', {
        type: 'button', 'data-key': `${g.name}|${s.address}|${a}`,
        'aria-label': `${a} ${s.address} in ${g.name}`,
        disabled: a === 'enable' ? !manual : s.state === (a === 'drain' ? 'drained' : 'disabled'),
        onclick: () => serverAction(g.name, s.address, a),
      }, a[0].toUpperCase() + a.slice(1)));
      return el('tr', {},
        el('th', { scope: 'row' }, el('code', {}, s.address)),
        el('td', {}, el('span', { class: `state state-${s.state}` }, s.state)),
        el('td', {}, num(s.in_flight)), el('td', {}, num(s.queue)),
        el('td', {}, num(s.requests)), el('td', {}, num(s.failures)),
        el('td', {}, check.time ? `${check.ok ? 'ok' : 'failed'} ${time(check.time)}${check.detail ? ' – ' + check.detail : ''}` : '–'),
        el('td', {}, healthHistory(s.history || [])),
        el('td', {}, el('div', { class: 'row' }, ...actions)));
    });
    return el('div', { class: 'card' }, el('h3', {}, g.name),
      el('table', {}, el('caption', { class: 'sr-only' }, `Servers of ${g.name}`),
        el('thead', {}, el('tr', {}, ...['Server', 'State', 'In flight', 'Queue', 'Requests', 'Failures', 'Last check', 'Health history', 'Actions']
          .map((h) => el('th', { scope: 'col' }, h)))),
        el('tbody', {}, ...rows)));
  });
  $('upstreams-list').replaceChildren(...(groups.length ? groups : [el('p', {}, 'No upstream groups configured.')]));
  if (focused) {
    const again = document.querySelector(`[data-key="${CSS.escape(focused)}"]`);
    if (again) again.focus();
  }
}

function healthHistory(history) {
  const last = history.slice(-30);
  const oks = last.filter((h) => h.ok).length;
  const box = svg('svg', { class: 'history', width: 6 * 30, height: 12, viewBox: `0 0 ${6 * 30} 12`, role: 'img',
    'aria-label': last.length ? `${oks} of the last ${last.length} checks passed` : 'no checks yet' });
  last.forEach((h, i) => {
    const r = svg('rect', { x: i * 6, y: 1, width: 4, height: 10, rx: 1, class: h.ok ? 'ok' : 'bad' });
    const t = svg('title', {});
    t.textContent = `${time(h.time)}: ${h.ok ? 'ok' : 'failed'}`;
    r.append(t);
    box.append(r);
  });
  return box;
}

async function serverAction(group, address, action) {
  try {
    const s = await api(`/api/upstreams/${encodeURIComponent(group)}/servers/${encodeURIComponent(address)}/${action}`, { method: 'POST' });
    say(`${address} in ${group}: ${s && s.state ? s.state : action + ' done'}.`);
  } catch (e) {
    say(`${action} ${address}: ${e.message}`, true);
  }
  refreshUpstreams();
}

// ---- Sites & routes ----

let routesData = null;

async function loadRoutes() {
  routesData = await viewData('/api/routes', 'routes-missing', () => $('routes-list').replaceChildren());
  renderRoutes(null);
}

function renderRoutes(hit) {
  if (!routesData) return;
  const cards = (routesData.sites || []).map((site, si) => el('div', { class: 'card' },
    el('h3', {}, (site.names || []).join(', ') || '(default)'),
    el('p', { class: 'small muted' }, `listen: ${(site.listen || []).join(', ') || '–'}`),
    el('table', {}, el('caption', { class: 'sr-only' }, `Routes of ${(site.names || [])[0] || 'the default site'}`),
      el('thead', {}, el('tr', {}, ...['#', 'Match', 'Methods', 'Handler', 'Target'].map((h) => el('th', { scope: 'col' }, h)))),
      el('tbody', {}, ...(site.routes || []).map((r, i) => el('tr', { class: hit && hit.si === si && hit.ri === i ? 'hit' : null },
        el('td', {}, i), el('td', {}, el('code', {}, r.match)), el('td', {}, Array.isArray(r.methods) ? r.methods.join(' ') || 'any' : (r.methods || 'any')),
        el('td', {}, r.handler), el('td', {}, r.target ? el('code', {}, r.target) : '–')))))));
  $('routes-list').replaceChildren(...cards);
}

async function testRoute(event) {
  event.preventDefault();
  const q = new URLSearchParams({ host: $('rt-host').value, path: $('rt-path').value, method: $('rt-method').value });
  const out = $('route-test-result');
  try {
    const r = await api('/api/route-test?' + q);
    // `site` and `route` are indices into /api/routes; `site_names` names the site.
    const siteName = (r.site_names || []).join(', ') || '(default)';
    const which = r.route === null ? 'no route' : `route #${r.route} (${r.match}), handler ${r.handler}`;
    out.textContent = `site ${siteName}, ${which}` + (r.status ? `, status ${r.status}` : '');
    if (routesData) renderRoutes({ si: r.site, ri: r.route });
  } catch (e) {
    out.textContent = e.status === 404 && !(e.body && e.body.site)
      ? `${e.message} (404)` : `Error ${e.status}: ${e.message}`;
  }
}

// ---- Configuration: editor, validation, diff, apply, history ----

const cfg = { text: '', etag: '', generation: 0, problems: [] };

async function loadConfig() {
  const c = await viewData('/api/config', 'config-missing', () => { $('config-body').hidden = true; });
  if (!c) return;
  $('config-body').hidden = false;
  Object.assign(cfg, { text: c.text || '', etag: c.etag || '', generation: c.generation, problems: [] });
  $('cfg-text').value = cfg.text;
  $('config-meta').textContent = `${c.source || '(no file)'} · generation ${c.generation} · ETag ${c.etag}`;
  renderGutter();
  renderProblems();
  $('cfg-diff-out').textContent = '(no changes)';
  loadHistory();
}

function renderGutter() {
  const lines = $('cfg-text').value.split('\n').length;
  const marks = new Map();
  for (const p of cfg.problems) if (!marks.has(p.line) || p.kind === 'error') marks.set(p.line, p);
  const nodes = [];
  for (let i = 1; i <= lines; ++i) {
    const p = marks.get(i);
    const text = (p ? (p.kind === 'error' ? '● ' : '▲ ') : '') + i;
    nodes.push(p ? el('span', { class: p.kind === 'error' ? 'err' : 'warn', title: p.message }, text) : text, '\n');
  }
  $('cfg-gutter').replaceChildren(...nodes);
  syncGutter();
}

function syncGutter() { $('cfg-gutter').scrollTop = $('cfg-text').scrollTop; }

function renderProblems() {
  const list = $('cfg-problems');
  if (!cfg.problems.length) {
    list.replaceChildren(el('li', {}, cfg.validated ? 'No problems.' : 'Not validated yet.'));
    return;
  }
  list.replaceChildren(...cfg.problems.map((p) => el('li', { class: p.kind },
    el('button', { type: 'button', onclick: () => moveCaret(p.line, p.column) },
      `${p.file ? p.file + ':' : ''}${p.line}:${p.column}: ${p.kind}: ${p.message}`))));
}

function moveCaret(line, column) {
  const t = $('cfg-text');
  const lines = t.value.split('\n');
  let offset = 0;
  for (let i = 0; i < Math.min(line - 1, lines.length); ++i) offset += lines[i].length + 1;
  offset += Math.max(0, Math.min((column || 1) - 1, (lines[line - 1] || '').length));
  t.focus();
  t.setSelectionRange(offset, offset);
  // Scroll the line into the middle of the box.
  const lineHeight = parseFloat(getComputedStyle(t).lineHeight) || 18;
  t.scrollTop = Math.max(0, (line - 1) * lineHeight - t.clientHeight / 2);
  syncGutter();
}

function setProblems(errors, warnings) {
  cfg.problems = [...(errors || []).map((e) => ({ ...e, kind: 'error' })), ...(warnings || []).map((w) => ({ ...w, kind: 'warning' }))];
  cfg.validated = true;
  renderGutter();
  renderProblems();
}

async function validateConfig() {
  try {
    const r = await api('/api/config/validate', { method: 'POST', body: $('cfg-text').value, headers: { 'Content-Type': 'application/toml' } });
    setProblems(r.errors, r.warnings);
    say(r.valid ? 'The configuration is valid.' : `${(r.errors || []).length} error(s) found.`, !r.valid);
    return r.valid;
  } catch (e) {
    say(e.status === 404 ? 'This server cannot validate (no /api/config/validate).' : `Validate: ${e.message}`, true);
    return false;
  }
}

// A line diff by the longest common subsequence: [{op: ' '|'+'|'-', line}]. Quadratic in the
// lines that differ once the common head and tail are cut, which a config file affords.
function diffLines(a, b) {
  let head = 0;
  while (head < a.length && head < b.length && a[head] === b[head]) ++head;
  let tail = 0;
  while (tail < a.length - head && tail < b.length - head && a[a.length - 1 - tail] === b[b.length - 1 - tail]) ++tail;
  const x = a.slice(head, a.length - tail), y = b.slice(head, b.length - tail);
  const n = x.length, m = y.length;
  const lcs = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
  for (let i = n - 1; i >= 0; --i)
    for (let j = m - 1; j >= 0; --j)
      lcs[i][j] = x[i] === y[j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
  const out = a.slice(0, head).map((line) => ({ op: ' ', line }));
  let i = 0, j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && x[i] === y[j]) { out.push({ op: ' ', line: x[i] }); ++i; ++j; }
    else if (i < n && (j === m || lcs[i + 1][j] >= lcs[i][j + 1])) out.push({ op: '-', line: x[i++] });
    else out.push({ op: '+', line: y[j++] });
  }
  for (const line of a.slice(a.length - tail)) out.push({ op: ' ', line });
  return out;
}

// Renders a diff with 3 lines of context around changes; returns the number of changed lines.
function renderDiff(target, before, after) {
  const d = diffLines(before.split('\n'), after.split('\n'));
  const changed = d.filter((x) => x.op !== ' ').length;
  if (!changed) { target.textContent = '(no changes)'; return 0; }
  const near = d.map((x, k) => d.slice(Math.max(0, k - 3), k + 4).some((y) => y.op !== ' '));
  const nodes = [];
  let skipped = false;
  d.forEach((x, k) => {
    if (!near[k]) { if (!skipped) nodes.push(el('span', { class: 'same' }, '…')); skipped = true; return; }
    skipped = false;
    nodes.push(el('span', { class: x.op === '+' ? 'add' : x.op === '-' ? 'del' : 'same' }, `${x.op} ${x.line}`));
  });
  target.replaceChildren(...nodes);
  return changed;
}

function showDiff() {
  const n = renderDiff($('cfg-diff-out'), cfg.text, $('cfg-text').value);
  say(n ? `${n} line(s) differ from the running configuration.` : 'No changes against the running configuration.');
}

// Opens the confirmation (its summary and diff already filled in), Cancel focused so that Enter
// alone never applies; true when Apply was chosen.
async function confirmed() {
  const dialog = $('apply-dialog');
  dialog.returnValue = '';
  dialog.showModal();
  $('apply-cancel').focus();
  const answer = await new Promise((resolve) => dialog.addEventListener('close', () => resolve(dialog.returnValue), { once: true }));
  return answer === 'apply';
}

async function applyConfig() {
  const text = $('cfg-text').value;
  const n = renderDiff($('apply-diff'), cfg.text, text);
  if (!n) { say('Nothing to apply: the text is the running configuration.'); return; }
  $('apply-summary').textContent = `${n} changed line(s) will be validated, written and applied by a graceful reload (generation ${cfg.generation} → next).`;
  if (!(await confirmed())) { say('Apply cancelled.'); return; }
  await sendConfig(() => api('/api/config', { method: 'PUT', body: text, headers: { 'If-Match': cfg.etag, 'Content-Type': 'application/toml' } }));
}

// Reports a PUT's or a rollback's answer and reloads the running text when it applied.
async function sendConfig(request) {
  try {
    const r = await request();
    const restart = (r.restart_required || []).length ? ` Needs a restart: ${r.restart_required.join(', ')}.` : '';
    say(`Applied: generation ${r.generation}. Changed: ${(r.changed || []).join(', ') || 'nothing'}.${restart}`);
    await loadConfig();
  } catch (e) {
    if (e.status === 422 && e.body && e.body.errors) {
      setProblems(e.body.errors, e.body.warnings);
      say(`Not applied: ${e.body.errors.length} error(s), marked in the editor.`, true);
    } else if (e.status === 412) {
      say('Not applied: the configuration changed since it was loaded. Load running, then apply again.', true);
    } else if (e.status === 409) {
      say(`Not applied: ${e.message}${e.body && e.body.rolled_back ? ' The previous version was restored.' : ''}`, true);
    } else if (e.status === 404) {
      say('This server cannot apply a configuration (no such endpoint).', true);
    } else {
      say(`Not applied (${e.status}): ${e.message}`, true);
    }
  }
}

function bareEtag(etag) { return etag.replace(/^W\//, '').replace(/^"|"$/g, ''); }

async function loadHistory() {
  const body = $('cfg-history').tBodies[0];
  let h;
  try {
    h = await api('/api/config/history');
  } catch (e) {
    body.replaceChildren(el('tr', {}, el('td', { colspan: 4 }, e.status === 404 ? 'No history on this server (/api/config/history: 404).' : `Error: ${e.message}`)));
    return;
  }
  body.replaceChildren(...(h.versions || []).map((v) => el('tr', {},
    el('td', {}, `${v.generation}${v.current ? ' (running)' : ''}`), el('td', {}, typeof v.time === 'number' ? time(v.time) : (v.time || '–')),
    el('td', {}, el('code', {}, v.etag)),
    el('td', {}, el('div', { class: 'row' },
      el('button', { type: 'button', 'aria-label': `Diff generation ${v.generation} against the editor`, onclick: () => diffVersion(v) }, 'Diff'),
      v.current ? null : el('button', { type: 'button', 'aria-label': `Roll back to generation ${v.generation}`, onclick: () => rollback(v) }, 'Roll back'))))));
}

async function diffVersion(v) {
  try {
    const text = await api(`/api/config/history/${encodeURIComponent(bareEtag(v.etag))}`);
    const n = renderDiff($('cfg-diff-out'), typeof text === 'string' ? text : (text.text || ''), $('cfg-text').value);
    say(`Generation ${v.generation} against the editor: ${n} line(s) differ.`);
  } catch (e) {
    say(`History: ${e.message}`, true);
  }
}

async function rollback(v) {
  $('apply-summary').textContent = `Roll back to generation ${v.generation} (${v.etag})? It is applied by a graceful reload.`;
  $('apply-diff').textContent = '';
  if (!(await confirmed())) { say('Rollback cancelled.'); return; }
  await sendConfig(() => api('/api/config/rollback', { method: 'POST', body: { etag: v.etag } }));
}

// ---- Logs: server-sent events, bounded, filtered in the page ----

const MAX_LINES = 1000;
const logs = { lines: [], paused: false, source: null, abort: null, held: 0 };

function startLogs() {
  stopLogs();
  notice('logs-missing', null);
  const path = `/api/logs?stream=${encodeURIComponent($('log-stream').value)}`;
  if (!session.token) {
    // Cookie session: the browser's EventSource, which reconnects by itself.
    const source = new EventSource(path);
    for (const kind of ['access', 'error', 'message']) source.addEventListener(kind, (e) => addLine(kind === 'message' ? 'access' : kind, e.data));
    source.onerror = () => {
      if (source.readyState === EventSource.CLOSED) probeLogs(path);
    };
    logs.source = source;
  } else {
    // EventSource cannot send an Authorization header: read the stream with fetch instead.
    readStream(path);
  }
}

async function probeLogs(path) {
  try {
    const r = await api(path, { raw: true });
    if (r.body) r.body.cancel();
    if (!r.ok) notice('logs-missing', missing(new ApiError(r.status, r.statusText), '/api/logs'));
  } catch (e) { notice('logs-missing', e); }
}

async function readStream(path) {
  const abort = new AbortController();
  logs.abort = abort;
  try {
    const headers = { Accept: 'text/event-stream', Authorization: 'Bearer ' + session.token };
    const r = await fetch(path, { headers, signal: abort.signal, cache: 'no-store' });
    if (!r.ok) { notice('logs-missing', missing(new ApiError(r.status, r.statusText), '/api/logs')); return; }
    const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value;
      let end;
      while ((end = buffer.search(/\r?\n\r?\n/)) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end).replace(/^\r?\n\r?\n/, '');
        let kind = 'message';
        const data = [];
        for (const line of block.split(/\r?\n/)) {
          if (line.startsWith('event:')) kind = line.slice(6).trim();
          else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
        }
        if (data.length) addLine(kind === 'message' ? 'access' : kind, data.join('\n'));
      }
    }
  } catch (e) {
    if (e.name !== 'AbortError') notice('logs-missing', e);
  }
}

function stopLogs() {
  if (logs.source) logs.source.close();
  if (logs.abort) logs.abort.abort();
  logs.source = null;
  logs.abort = null;
}

function addLine(kind, text) {
  logs.lines.push({ kind, text });
  if (logs.lines.length > MAX_LINES) logs.lines.splice(0, logs.lines.length - MAX_LINES);
  if (logs.paused) { ++logs.held; updateLogCount(); return; }
  renderLogs();
}

function renderLogs() {
  const filter = $('log-filter').value.toLowerCase();
  const box = $('log-lines');
  const atBottom = box.scrollTop + box.clientHeight >= box.scrollHeight - 4;
  const shown = logs.lines.filter((l) => !filter || l.text.toLowerCase().includes(filter));
  box.replaceChildren(...shown.map((l) => el('div', { class: l.kind }, l.text)));
  if (atBottom) box.scrollTop = box.scrollHeight;
  updateLogCount(shown.length);
}

function updateLogCount(shown) {
  const held = logs.paused ? ` · paused, ${logs.held} new` : '';
  if (shown !== undefined) logs.shown = shown;
  $('log-count').textContent = `${logs.shown || 0} of ${logs.lines.length} lines (last ${MAX_LINES} kept)${held}`;
}

// ---- Wiring ----

document.addEventListener('DOMContentLoaded', async () => {
  window.addEventListener('hashchange', route);
  $('login-form').addEventListener('submit', async (e) => {
    e.preventDefault();
    const kind = new FormData(e.target).get('kind');
    const button = $('login-submit');
    button.disabled = true;
    try {
      await login(kind, $('login-secret').value);
      $('login-secret').value = '';
      say('Logged in.');
      await loggedIn();
    } catch (error) {
      say(error.message, true);
      $('login-secret').focus();
    } finally {
      button.disabled = false;
    }
  });
  $('logout').addEventListener('click', logout);
  $('route-test-form').addEventListener('submit', testRoute);
  $('cfg-text').addEventListener('input', renderGutter);
  $('cfg-text').addEventListener('scroll', syncGutter);
  $('cfg-reload').addEventListener('click', loadConfig);
  $('cfg-validate').addEventListener('click', validateConfig);
  $('cfg-diff').addEventListener('click', showDiff);
  $('cfg-apply').addEventListener('click', applyConfig);
  $('log-filter').addEventListener('input', renderLogs);
  $('log-stream').addEventListener('change', () => { logs.lines = []; startLogs(); renderLogs(); });
  $('log-clear').addEventListener('click', () => { logs.lines = []; logs.held = 0; renderLogs(); });
  $('log-pause').addEventListener('click', () => {
    logs.paused = !logs.paused;
    logs.held = 0;
    $('log-pause').setAttribute('aria-pressed', String(logs.paused));
    $('log-pause').textContent = logs.paused ? 'Resume' : 'Pause';
    if (!logs.paused) renderLogs(); else updateLogCount();
  });

  // Already signed in (a cookie, or this tab's token)? Otherwise the login view.
  try {
    await api('/api/status');
    await loggedIn();
  } catch (e) {
    session.token = '';
    sessionStorage.removeItem(TOKEN_KEY);
    loggedOut(e.status === 401 ? '' : `Cannot reach the admin API: ${e.message}`);
  }
});
