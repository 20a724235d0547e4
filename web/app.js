// transformerd's page: a translator on POST /v1/translate and a
// cross-attention explorer for one translated sentence. Plain JS, no build
// step, no other origin (the Content-Security-Policy allows none).
'use strict';

const $ = (id) => document.getElementById(id);
const SVGNS = 'http://www.w3.org/2000/svg';
const WORD = '\u2581';
const KEY = 'transformerd-api-key';

// ---- the API -------------------------------------------------------------

class ApiError extends Error {
  constructor(status, body) {
    const e = body && body.error;
    // the native error object {"error":{"code","message","param"}}, or
    // LibreTranslate's {"error": "message"} (the file endpoint)
    super(typeof e === 'string' ? e : e && typeof e.message === 'string' ? e.message : 'HTTP ' + status);
    this.status = status;
    this.code = e && e.code;
    this.param = e && e.param;
  }
}

async function api(path, body) {
  const headers = {};
  const key = sessionStorage.getItem(KEY);
  if (key) headers.Authorization = 'Bearer ' + key;
  const init = { headers };
  if (body !== undefined) {
    init.method = 'POST';
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const res = await fetch(path, init);
  let data = null;
  try { data = await res.json(); } catch (e) { data = null; }
  if (!res.ok) throw new ApiError(res.status, data);
  return data;
}

// POST path as a stream of events (body's "stream": true, NDJSON lines):
// onSentence(data) for each sentence as the daemon finishes it; resolves to
// the whole answer (the "done" event); rejects as api() does, also for an
// "error" event after the stream began.
async function apiStream(path, body, onSentence) {
  const headers = { 'Content-Type': 'application/json', Accept: 'application/x-ndjson' };
  const key = sessionStorage.getItem(KEY);
  if (key) headers.Authorization = 'Bearer ' + key;
  const res = await fetch(path, { method: 'POST', headers,
                                  body: JSON.stringify(Object.assign({}, body, { stream: true })) });
  if (!res.ok) {
    let data = null;
    try { data = await res.json(); } catch (e) { data = null; }
    throw new ApiError(res.status, data);
  }
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    let nl;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      if (!line) continue;
      const ev = JSON.parse(line);
      if (ev.event === 'sentence') onSentence(ev.data);
      else if (ev.event === 'done') return ev.data;
      else if (ev.event === 'error') throw new ApiError(500, ev.data);
    }
  }
  throw new ApiError(500, null); // the stream ended without its answer
}

function showError(err) {
  const box = $('error');
  if (!err) { box.hidden = true; box.textContent = ''; return; }
  let text = err.message;
  if (err.code) text += ' (' + err.code + (err.param ? ', ' + err.param : '') + ')';
  box.textContent = text;
  box.dataset.code = err.code || '';
  box.hidden = false;
  if (err.status === 401) $('keybox').hidden = false;
}

// ---- models and the served-by line --------------------------------------

// name -> {source, target} of every served model: the languages of what the
// page shows (lang attributes, so that browsers and screen readers read each
// text in its own language)
const MODELS = {};
// source code -> its targets (LibreTranslate's GET /languages): every pair
// the daemon serves, a multilingual model's included
const PAIRS = {};

// The From and Into choices: every source, and the targets of the one
// picked (every target when none is).
function fillPairs() {
  const src = $('source'), tgt = $('target');
  const keep = tgt.value;
  const into = src.value ? PAIRS[src.value] || [] :
    [...new Set(Object.values(PAIRS).flat())].sort();
  tgt.textContent = '';
  const any = document.createElement('option');
  any.value = '';
  any.textContent = 'the model\u2019s';
  tgt.append(any);
  for (const c of into) {
    const o = document.createElement('option');
    o.value = o.textContent = c;
    tgt.append(o);
  }
  if (into.includes(keep)) tgt.value = keep;
}

async function loadPairs() {
  try {
    const langs = await api('/languages');
    const src = $('source');
    for (const l of langs) {
      PAIRS[l.code] = l.targets;
      if (!l.targets.length) continue;
      const o = document.createElement('option');
      o.value = l.code;
      o.textContent = l.name === l.code ? l.code : l.name + ' (' + l.code + ')';
      src.append(o);
    }
    fillPairs();
    // a file goes into any served target too
    const ft = $('ftarget');
    for (const c of [...new Set(Object.values(PAIRS).flat())].sort())
      if (![...ft.options].some((o) => o.value === c)) {
        const o = document.createElement('option');
        o.value = o.textContent = c;
        ft.append(o);
      }
  } catch (err) {
    // the pairs are optional: the model choice alone still translates
  }
}

async function loadModels() {
  try {
    const data = await api('/v1/models');
    const sel = $('model');
    sel.textContent = '';
    if (data.models.length > 1) {
      // nothing named: the daemon picks the model by the text's language
      const o = document.createElement('option');
      o.value = '';
      o.textContent = 'by the text\u2019s language';
      sel.append(o);
    }
    const targets = $('ftarget');
    targets.textContent = '';
    for (const m of data.models) {
      MODELS[m.name] = m.languages;
      if (!m.languages.codes &&
          ![...targets.options].some((o) => o.value === m.languages.target)) {
        const t = document.createElement('option');
        t.value = t.textContent = m.languages.target;
        targets.append(t);
      }
      const o = document.createElement('option');
      o.value = m.name;
      o.textContent = m.name + ' (' + (m.languages.codes ? m.languages.codes.length + ' languages' :
        m.languages.source + ' \u2192 ' + m.languages.target) + ')';
      sel.append(o);
    }
    const m = data.models[0];
    if (m) {
      $('served').textContent = 'Served by transformerd: ' + data.models.map((x) => x.name + ' (' +
        x.languages.source + ' \u2192 ' + x.languages.target + ')').join(', ') + ' on ' + m.device +
        ', ' + m.dtype + ' weights';
      $('beam').value = m.defaults.beam_size;
      $('beam').max = m.limits.max_beam_size;
      $('nhyp').max = m.limits.max_beam_size;
    }
  } catch (err) {
    $('served').textContent = 'The model list is not available: ' + err.message;
  }
}

// ---- the translator ------------------------------------------------------

let lastRequest = null; // options of the last translation, for the attention view

function lines() {
  return $('src').value.split('\n').map((l) => l.trim()).filter((l) => l.length > 0);
}

function intOf(id) {
  const v = Number($(id).value);
  return Number.isInteger(v) ? v : $(id).value; // the API names a bad value
}

// The sentences of the texts as the browser counts them (Intl.Segmenter:
// ICU's rules, as the daemon's), for the progress bar; 0 when it cannot.
function countSentences(texts, lang) {
  if (typeof Intl === 'undefined' || !Intl.Segmenter) return 0;
  const seg = new Intl.Segmenter(lang || undefined, { granularity: 'sentence' });
  let n = 0;
  for (const t of texts)
    for (const s of seg.segment(t)) if (s.segment.trim()) n++;
  return n;
}

// Each text's sentences so far, as they come (the final answer replaces them).
function showPartial(texts, parts) {
  const ol = $('results');
  ol.textContent = '';
  ol.dataset.partials = String(Number(ol.dataset.partials || 0) + 1);
  texts.forEach((t, i) => {
    const li = document.createElement('li');
    li.className = 'partial';
    const src = document.createElement('div');
    src.className = 'source';
    src.textContent = t;
    const tr = document.createElement('div');
    tr.className = 'partial-text';
    const got = parts[i] || [];
    tr.textContent = got.map((s) => (s === undefined ? '…' : s)).join(' ');
    li.append(src, tr);
    ol.append(li);
  });
}

async function translate() {
  const texts = lines();
  showError(null);
  if (texts.length === 0) { $('status').textContent = 'Type something to translate.'; return; }
  const req = { text: texts, model: $('model').value || undefined, beam_size: intOf('beam'),
                num_hypotheses: intOf('nhyp'), return_tokens: true };
  // a pair picked: for a multilingual model, or for the daemon to route
  const named = MODELS[req.model];
  if ($('target').value && (!named || named.codes)) {
    req.target = $('target').value;
    if ($('source').value) req.source = $('source').value;
  }
  $('go').disabled = true;
  $('status').textContent = 'Translating ' + texts.length + (texts.length > 1 ? ' texts…' : ' text…');
  const t0 = performance.now();
  // the sentences show as the daemon finishes them, with a progress bar
  const bar = $('progress');
  const total = countSentences(texts, (MODELS[req.model] || {}).source);
  let done = 0;
  const parts = texts.map(() => []);
  if (total > 0) bar.max = total; else bar.removeAttribute('max');
  bar.value = 0;
  bar.hidden = false;
  try {
    const data = await apiStream('/v1/translate', req, (s) => {
      parts[s.text_index][s.sentence_index] = s.text;
      done++;
      if (total > 0) bar.value = Math.min(done, total);
      $('status').textContent = done + (total > 0 ? ' of ' + total : '') + ' sentences translated…';
      showPartial(texts, parts);
    });
    if (total > 0) bar.value = total;
    lastRequest = req;
    showResults(texts, data);
    $('status').textContent = texts.length + (texts.length > 1 ? ' texts' : ' text') + ' in ' +
      Math.round(performance.now() - t0) + ' ms (' + data.usage.source_tokens + ' source, ' +
      data.usage.target_tokens + ' target tokens)';
  } catch (err) {
    $('status').textContent = '';
    showError(err);
  } finally {
    $('go').disabled = false;
    bar.hidden = true;
  }
}

function fmtScore(s) { return s === null ? 'score: n/a' : 'score ' + s.toFixed(3); }

function showResults(texts, data) {
  const ol = $('results');
  ol.textContent = '';
  data.translations.forEach((t, i) => {
    // texts routed each by its own language name their model
    const langs = MODELS[t.model || data.model] || {source: '', target: ''};
    const li = document.createElement('li');
    const src = document.createElement('div');
    src.className = 'source';
    src.lang = langs.source;
    src.textContent = texts[i];
    const tr = document.createElement('div');
    tr.lang = langs.target;
    const txt = document.createElement('span');
    txt.className = 'translation';
    txt.textContent = t.text;
    const sc = document.createElement('span');
    sc.className = 'score';
    sc.textContent = fmtScore(t.score);
    tr.append(txt, sc);
    li.append(src, tr);
    if (t.hypotheses && t.hypotheses.length > 1) {
      const alts = document.createElement('ol');
      alts.className = 'alts';
      alts.lang = langs.target;
      alts.start = 2;
      for (const h of t.hypotheses.slice(1)) {
        const a = document.createElement('li');
        a.className = 'alternative';
        a.textContent = h.text + '  ';
        const s = document.createElement('span');
        s.className = 'score';
        s.textContent = fmtScore(h.score);
        a.append(s);
        alts.append(a);
      }
      li.append(alts);
    }
    const b = document.createElement('button');
    b.type = 'button';
    b.className = 'quiet inspect';
    b.textContent = 'Attention';
    b.setAttribute('aria-label', 'Show the attention of text ' + (i + 1));
    b.addEventListener('click', () => inspect(texts[i]));
    li.append(b);
    ol.append(li);
  });
}

// ---- the attention explorer ----------------------------------------------

let A = null; // {src, tgt, srcOff, tgtOff, text, source, layers, heads, cross}

async function inspect(text) {
  showError(null);
  $('status').textContent = 'Asking for the attention…';
  // the line as one model input: one attention matrix (a line of several
  // sentences is translated sentence by sentence in the list above)
  const req = Object.assign({}, lastRequest, { text: [text], num_hypotheses: 1,
                                                return_attention: true, split_sentences: false });
  try {
    const data = await api('/v1/translate', req);
    const t = data.translations[0];
    A = { source: text, text: t.text, src: t.source_tokens, tgt: t.tokens,
          srcOff: t.source_offsets, tgtOff: t.offsets, layers: t.attention.layers,
          heads: t.attention.heads, cross: t.attention.cross };
    $('status').textContent = '';
    fillPickers();
    $('attention').hidden = false;
    render();
    $('attention').scrollIntoView({ block: 'start' });
    $('layer').focus();
  } catch (err) {
    $('status').textContent = '';
    showError(err);
  }
}

function fillPickers() {
  const opts = (sel, items, avgLabel) => {
    sel.textContent = '';
    items.forEach((v, i) => {
      const o = document.createElement('option');
      o.value = String(i);
      o.textContent = String(v);
      sel.append(o);
    });
    const o = document.createElement('option');
    o.value = 'avg';
    o.textContent = avgLabel;
    sel.append(o);
  };
  opts($('layer'), A.layers, 'average of layers');
  opts($('head'), A.heads, 'average of heads');
  $('layer').value = String(A.layers.length - 1);
  $('head').value = '0';
}

// The elementwise mean of equally shaped matrices.
function mean(mats) {
  const T = mats[0].length, S = mats[0][0].length;
  const out = [];
  for (let t = 0; t < T; t++) {
    const row = new Array(S);
    for (let s = 0; s < S; s++) {
      let sum = 0;
      for (const m of mats) sum += m[t][s];
      row[s] = sum / mats.length;
    }
    out.push(row);
  }
  return out;
}

// The matrix [t][s] of a layer index (or 'avg') and a head index (or 'avg').
function matrix(layer, head) {
  const ls = layer === 'avg' ? A.layers.map((_, i) => i) : [Number(layer)];
  const perLayer = ls.map((l) => head === 'avg' ? mean(A.cross[l]) : A.cross[l][Number(head)]);
  return perLayer.length === 1 ? perLayer[0] : mean(perLayer);
}

function isSpecial(p) { return /^<.*>$/.test(p) || /^>>.*<<$/.test(p); }

// Groups of piece indices, one per word: a word starts at a piece with the
// word mark, at a special token and after one.
function words(pieces) {
  const groups = [];
  pieces.forEach((p, i) => {
    const prev = i > 0 ? pieces[i - 1] : null;
    if (i === 0 || p.startsWith(WORD) || isSpecial(p) || isSpecial(prev)) groups.push([i]);
    else groups[groups.length - 1].push(i);
  });
  return groups;
}

// The word-level matrix: a source word sums its pieces' weights (a row
// still sums to 1), a target word averages its pieces' rows.
function wordMatrix(W, tg, sg) {
  return tg.map((tIdx) => sg.map((sIdx) => {
    let acc = 0;
    for (const t of tIdx) for (const s of sIdx) acc += W[t][s];
    return acc / tIdx.length;
  }));
}

function pieceLabel(p, i) {
  if (p === WORD) return WORD;
  if (p.startsWith(WORD)) return p.slice(1);
  return i > 0 && !isSpecial(p) ? '\u00b7' + p : p; // a piece inside a word
}

// What the current pickers show: matrix, labels, raw pieces, word starts.
function view(layer, head) {
  const W = matrix(layer, head);
  if ($('units').value === 'words') {
    const tg = words(A.tgt), sg = words(A.src);
    const join = (pcs, g) => g.map((i) => pcs[i]).join('').split(WORD).join(' ').trim() || WORD;
    return { W: wordMatrix(W, tg, sg), rows: tg.map((g) => join(A.tgt, g)),
             cols: sg.map((g) => join(A.src, g)), rowPieces: tg.map((g) => g.map((i) => A.tgt[i]).join(' ')),
             colPieces: sg.map((g) => g.map((i) => A.src[i]).join(' ')), tg, sg,
             rowBreak: tg.map((_, i) => i > 0), colBreak: sg.map((_, i) => i > 0) };
  }
  const idx = (n) => Array.from({ length: n }, (_, i) => [i]);
  const brk = (pcs) => pcs.map((p, i) => i > 0 && (p.startsWith(WORD) || isSpecial(p) || isSpecial(pcs[i - 1])));
  return { W, rows: A.tgt.map(pieceLabel), cols: A.src.map(pieceLabel), rowPieces: A.tgt,
           colPieces: A.src, tg: idx(A.tgt.length), sg: idx(A.src.length), rowBreak: brk(A.tgt),
           colBreak: brk(A.src) };
}

function color(w) {
  const x = Math.max(0, Math.min(1, w));
  return 'hsl(214,70%,' + (98 - 68 * Math.sqrt(x)).toFixed(1) + '%)';
}

// The source and target sentences as spans of their pieces (offsets).
function sentence(el, text, pieces, offsets) {
  el.textContent = '';
  const chars = Array.from(text);
  pieces.forEach((p, i) => {
    const span = document.createElement('span');
    span.textContent = chars.slice(offsets[i][0], offsets[i][1]).join('');
    span.dataset.piece = p;
    el.append(span);
  });
}

function highlight(t, s, v) {
  const mark = (el, set) => Array.from(el.children).forEach((c, i) => c.classList.toggle('hl', set.has(i)));
  mark($('att-tgt'), new Set(t === null ? [] : v.tg[t]));
  mark($('att-src'), new Set(s === null ? [] : v.sg[s]));
  for (const el of $('map').querySelectorAll('text')) {
    const on = (el.dataset.axis === 'row' && Number(el.dataset.i) === t) ||
               (el.dataset.axis === 'col' && Number(el.dataset.i) === s);
    el.classList.toggle('hl', on);
  }
  $('hover').textContent = t === null ? 'Point at a cell, or focus the map and use the arrow keys.'
    : v.rows[t] + ' \u2190 ' + v.cols[s] + ': ' + v.W[t][s].toFixed(4);
}

function render() {
  if (!A) return;
  sentence($('att-src'), A.source, A.src, A.srcOff);
  sentence($('att-tgt'), A.text, A.tgt, A.tgtOff);
  const grid = $('view').value === 'grid';
  $('grid').hidden = !grid;
  $('map').hidden = grid;
  $('head').disabled = grid;
  if (grid) renderGrid(); else renderMap();
}

function svg(tag, attrs) {
  const el = document.createElementNS(SVGNS, tag);
  for (const k in attrs) el.setAttribute(k, attrs[k]);
  return el;
}

function renderMap() {
  const layer = $('layer').value, head = $('head').value;
  const v = view(layer, head);
  const T = v.rows.length, S = v.cols.length, GAP = 3;
  const longest = (ls) => ls.reduce((m, l) => Math.max(m, Array.from(l).length), 1);
  const left = 12 + 7.5 * longest(v.rows), top = 16 + 6.5 * longest(v.cols);
  // cells as wide as the map's box allows (14 to 44 px): the whole map in
  // view on a phone for a sentence of ~20 pieces, no tiny map on a screen
  const breaks = v.colBreak.filter(Boolean).length;
  const avail = $('map').clientWidth || 600;
  const C = Math.max(14, Math.min(44, Math.floor((avail - left - 12 - GAP * breaks) / S)));
  const xs = [], ys = [];
  let x = left, y = top;
  for (let s = 0; s < S; s++) { if (v.colBreak[s]) x += GAP; xs.push(x); x += C; }
  for (let t = 0; t < T; t++) { if (v.rowBreak[t]) y += GAP; ys.push(y); y += C; }
  const root = svg('svg', { width: x + 10, height: y + 10, role: 'img', tabindex: '0',
                            'aria-label': 'attention map, ' + T + ' target by ' + S + ' source' });
  root.dataset.rows = T;
  root.dataset.cols = S;
  root.dataset.layer = layer;
  root.dataset.head = head;
  root.dataset.units = $('units').value;
  root.id = 'heatmap';
  for (let s = 0; s < S; s++) {
    const cx = xs[s] + C / 2, cy = top - 6;
    const l = svg('text', { x: cx, y: cy, transform: 'rotate(-55 ' + cx + ' ' + cy + ')',
                            class: 'col-label' });
    l.textContent = v.cols[s];
    l.dataset.axis = 'col';
    l.dataset.i = s;
    l.dataset.piece = v.colPieces[s];
    root.append(l);
  }
  // the row labels on a backing of their own, drawn over the cells and
  // kept in view while a wide map scrolls sideways (stickLabels)
  const rowG = svg('g', { class: 'row-labels' });
  rowG.append(svg('rect', { x: 0, y: top - 2, width: left, height: y - top + 4, class: 'row-bg' }));
  for (let t = 0; t < T; t++) {
    const l = svg('text', { x: left - 6, y: ys[t] + C / 2 + 4, 'text-anchor': 'end',
                            class: 'row-label' });
    l.textContent = v.rows[t];
    l.dataset.axis = 'row';
    l.dataset.i = t;
    l.dataset.piece = v.rowPieces[t];
    rowG.append(l);
  }
  for (let t = 0; t < T; t++) {
    for (let s = 0; s < S; s++) {
      const r = svg('rect', { x: xs[s], y: ys[t], width: C - 1, height: C - 1,
                              fill: color(v.W[t][s]), class: 'cell' });
      r.dataset.t = t;
      r.dataset.s = s;
      r.dataset.w = String(v.W[t][s]);
      root.append(r);
    }
  }
  root.append(rowG);
  const cursor = svg('rect', { class: 'cursor', width: C - 1, height: C - 1, visibility: 'hidden' });
  root.append(cursor);
  let at = null;
  const focusCell = (t, s) => {
    at = [t, s];
    cursor.setAttribute('x', xs[s]);
    cursor.setAttribute('y', ys[t]);
    cursor.setAttribute('visibility', 'visible');
    highlight(t, s, v);
  };
  root.addEventListener('mousemove', (e) => {
    const d = e.target.dataset;
    if (d && d.t !== undefined) focusCell(Number(d.t), Number(d.s));
  });
  root.addEventListener('mouseleave', () => {
    cursor.setAttribute('visibility', 'hidden');
    highlight(null, null, v);
  });
  root.addEventListener('focus', () => { if (!at) focusCell(0, 0); });
  root.addEventListener('keydown', (e) => {
    const [t, s] = at || [0, 0];
    const moves = { ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1] };
    const m = moves[e.key];
    if (!m) return;
    e.preventDefault();
    focusCell(Math.max(0, Math.min(T - 1, t + m[0])), Math.max(0, Math.min(S - 1, s + m[1])));
  });
  $('map').textContent = '';
  $('map').append(root);
  stickLabels();
  highlight(null, null, v);
}

// A map wider than its box scrolls sideways: its row labels move with the
// scroll so that they stay at the box's left edge (a phone shows which
// target piece a row is, wherever the columns are).
function stickLabels() {
  const g = document.querySelector('#heatmap g.row-labels');
  if (g) g.setAttribute('transform', 'translate(' + $('map').scrollLeft + ' 0)');
}

// Every head of the selected layer (or of the average of layers) at once.
function renderGrid() {
  const box = $('grid');
  box.textContent = '';
  const layer = $('layer').value;
  box.dataset.layer = layer;
  A.heads.forEach((h, hi) => {
    const v = view(layer, String(hi));
    const T = v.W.length, S = v.W[0].length;
    const P = Math.max(3, Math.min(16, Math.floor(140 / Math.max(T, S))));
    const cv = document.createElement('canvas');
    cv.width = S * P;
    cv.height = T * P;
    const g = cv.getContext('2d');
    for (let t = 0; t < T; t++) {
      for (let s = 0; s < S; s++) {
        g.fillStyle = color(v.W[t][s]);
        g.fillRect(s * P, t * P, P, P);
      }
    }
    const b = document.createElement('button');
    b.type = 'button';
    b.className = 'multiple';
    b.dataset.head = String(hi);
    b.setAttribute('aria-label', 'head ' + h + ': show it alone');
    const cap = document.createElement('span');
    cap.textContent = 'head ' + h;
    b.append(cv, cap);
    b.addEventListener('click', () => {
      $('head').value = String(hi);
      $('view').value = 'one';
      render();
      $('heatmap').focus();
    });
    box.append(b);
  });
}

// ---- a file ---------------------------------------------------------------

let chosenFile = null;

function chooseFile(f) {
  chosenFile = f || null;
  $('fgo').disabled = !chosenFile;
  $('fdownload').hidden = true;
  $('fstatus').classList.remove('warn');
  $('fstatus').textContent = chosenFile ? chosenFile.name + ' (' + chosenFile.size + ' bytes)' : '';
}

// The file through LibreTranslate's POST /translate_file (the model picked
// above gives its source, else the daemon detects it), then its download.
async function translateFile() {
  if (!chosenFile) return;
  showError(null);
  // a bilingual model gives the pair; otherwise the pair picked, or the
  // file's detected language into the file's target
  const named = MODELS[$('model').value];
  const m = named && !named.codes ? named : null;
  const form = new FormData();
  form.append('file', chosenFile, chosenFile.name);
  form.append('source', m ? m.source : $('source').value || 'auto');
  form.append('target', m ? m.target : $('ftarget').value);
  const headers = {};
  const key = sessionStorage.getItem(KEY);
  if (key) headers.Authorization = 'Bearer ' + key;
  $('fgo').disabled = true;
  $('fprogress').hidden = false;
  $('fprogress').removeAttribute('value');
  $('fstatus').classList.remove('warn');
  $('fstatus').textContent = 'Translating ' + chosenFile.name + '…';
  const t0 = performance.now();
  try {
    const res = await fetch('/translate_file', { method: 'POST', headers, body: form });
    let data = null;
    try { data = await res.json(); } catch (e) { data = null; }
    if (!res.ok) throw new ApiError(res.status, data);
    // the daemon names the file on its own origin: the path is all we need
    const url = new URL(data.translatedFileUrl, location.href);
    const a = $('fdownload');
    a.href = url.pathname;
    a.download = decodeURIComponent(url.pathname.split('/').pop().replace(/^[0-9a-f]{32}\./, ''));
    a.textContent = 'Download ' + a.download;
    a.hidden = false;
    // a file already in the target language comes back as it was: say so
    // rather than that it was translated
    const into = m ? m.target : $('ftarget').value;
    const det = data.detectedLanguage;
    const from = det ? det.language : (m ? m.source : '');
    const same = from !== '' && from === into;
    $('fstatus').classList.toggle('warn', same);
    $('fstatus').textContent = same
      ? chosenFile.name + ' is already in ' + into + (det ? ' (detected)' : '') +
        ': nothing was translated, the download is the file as it was'
      : chosenFile.name + ' translated in ' + Math.round(performance.now() - t0) + ' ms';
  } catch (err) {
    $('fstatus').textContent = '';
    showError(err);
  } finally {
    $('fgo').disabled = false;
    $('fprogress').hidden = true;
  }
}

// ---- page weight, key, wiring ------------------------------------------

function reportWeight() {
  const nav = performance.getEntriesByType('navigation')[0];
  let bytes = nav ? nav.decodedBodySize : 0;
  for (const r of performance.getEntriesByType('resource')) {
    if (!r.name.includes('/v1/')) bytes += r.decodedBodySize;
  }
  $('weight').textContent = 'page weight: ' + (bytes / 1024).toFixed(1) + ' KiB, no other origin';
  document.body.dataset.weight = String(bytes);
}

function init() {
  $('form').addEventListener('submit', (e) => { e.preventDefault(); translate(); });
  $('src').addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) { e.preventDefault(); translate(); }
  });
  for (const id of ['layer', 'head', 'units', 'view']) $(id).addEventListener('change', render);
  // the map follows the window's width (its cells are sized to it)
  $('map').addEventListener('scroll', stickLabels);
  let resizing = 0;
  window.addEventListener('resize', () => {
    clearTimeout(resizing);
    resizing = setTimeout(() => { if (!$('map').hidden) render(); }, 100);
  });
  $('file').addEventListener('change', () => chooseFile($('file').files[0]));
  const drop = $('drop');
  drop.addEventListener('dragover', (e) => { e.preventDefault(); drop.classList.add('over'); });
  drop.addEventListener('dragleave', () => drop.classList.remove('over'));
  drop.addEventListener('drop', (e) => {
    e.preventDefault();
    drop.classList.remove('over');
    chooseFile(e.dataTransfer.files[0]);
  });
  $('fgo').addEventListener('click', translateFile);
  $('source').addEventListener('change', fillPairs);
  $('keysave').addEventListener('click', () => {
    sessionStorage.setItem(KEY, $('key').value);
    $('key').value = '';
    $('keybox').hidden = true;
    showError(null);
    loadModels();
    loadPairs();
  });
  loadModels().then(loadPairs);
  window.addEventListener('load', () => setTimeout(reportWeight, 0));
}

init();
