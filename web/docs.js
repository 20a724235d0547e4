// docs.js - the API's page (/docs): the daemon's own /openapi.json drawn as
// HTML, with nothing from outside this server. Every text of the document
// goes in through textContent, never as markup.
'use strict';

const $ = (id) => document.getElementById(id);

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}

// The object a "$ref" ("#/components/...") points to, or o itself.
function deref(doc, o) {
  for (let i = 0; o && o.$ref && i < 16; i++) {
    let v = doc;
    for (const k of o.$ref.replace(/^#\//, '').split('/')) v = v ? v[k.replace(/~1/g, '/').replace(/~0/g, '~')] : undefined;
    o = v;
  }
  return o || {};
}

// A schema in a few words: its type, its choices and its bounds.
function typeText(doc, s, depth = 0) {
  s = deref(doc, s);
  if (depth > 3) return s.type || 'value';
  const alt = s.oneOf || s.anyOf;
  if (alt) return alt.map((x) => typeText(doc, x, depth + 1)).join(' or ');
  let t = s.type || (s.properties ? 'object' : 'value');
  if (t === 'array' && s.items) t = 'array of ' + typeText(doc, s.items, depth + 1);
  const notes = [];
  if (s.enum) notes.push('one of ' + s.enum.map((x) => JSON.stringify(x)).join(', '));
  if (s.minimum !== undefined || s.maximum !== undefined)
    notes.push((s.minimum !== undefined ? s.minimum : '…') + '..' + (s.maximum !== undefined ? s.maximum : '…'));
  if (s.maxItems !== undefined) notes.push('at most ' + s.maxItems + ' items');
  if (s.default !== undefined) notes.push('default ' + JSON.stringify(s.default));
  return notes.length ? t + ' (' + notes.join('; ') + ')' : t;
}

function table(head, rows) {
  const t = el('table', null, 'api');
  const tr = el('tr');
  for (const h of head) tr.appendChild(el('th', h));
  t.appendChild(el('thead')).appendChild(tr);
  const body = el('tbody');
  for (const r of rows) {
    const row = el('tr');
    for (const c of r) row.appendChild(el('td', c));
    body.appendChild(row);
  }
  t.appendChild(body);
  return t;
}

// One operation: METHOD path, its words, parameters, bodies and answers.
function operation(doc, path, method, op, n) {
  const sec = el('section', null, 'op');
  sec.id = 'op-' + n;
  const h = el('h2');
  h.appendChild(el('code', method.toUpperCase() + ' ' + path));
  sec.appendChild(h);
  if (op.summary) sec.appendChild(el('p', op.summary));
  if (op.description) sec.appendChild(el('p', op.description, 'hint'));
  const params = (op.parameters || []).map((p) => deref(doc, p));
  if (params.length) {
    sec.appendChild(el('h3', 'Parameters'));
    sec.appendChild(table(['name', 'in', 'required', 'type', 'description'],
      params.map((p) => [p.name, p.in, p.required ? 'yes' : 'no', typeText(doc, p.schema || {}), p.description || ''])));
  }
  const rb = deref(doc, op.requestBody);
  for (const [ctype, media] of Object.entries(rb.content || {})) {
    const s = deref(doc, media.schema);
    sec.appendChild(el('h3', 'Body: ' + ctype));
    const req = new Set(s.required || []);
    const props = Object.entries(s.properties || {});
    if (props.length)
      sec.appendChild(table(['field', 'required', 'type', 'description'],
        props.map(([k, v]) => [k, req.has(k) ? 'yes' : 'no', typeText(doc, v), deref(doc, v).description || ''])));
    else sec.appendChild(el('p', typeText(doc, s)));
  }
  const answers = Object.entries(op.responses || {}).map(([code, r]) => {
    r = deref(doc, r);
    const types = Object.keys(r.content || {}).join(', ');
    return [code, (r.description || '') + (types ? ' (' + types + ')' : '')];
  });
  if (answers.length) {
    sec.appendChild(el('h3', 'Answers'));
    sec.appendChild(table(['status', 'description'], answers));
  }
  return sec;
}

function draw(doc) {
  const info = doc.info || {};
  $('title').textContent = (info.title || 'API') + ' ' + (info.version || '');
  $('about').textContent = info.description || '';
  const toc = el('ul');
  const ops = $('ops');
  let n = 0;
  for (const [path, item] of Object.entries(doc.paths || {})) {
    for (const method of ['get', 'post', 'put', 'delete', 'patch', 'head', 'options']) {
      if (!item[method]) continue;
      const op = item[method];
      const li = el('li');
      const a = el('a', method.toUpperCase() + ' ' + path);
      a.href = '#op-' + n;
      li.appendChild(a);
      if (op.summary) li.appendChild(el('span', ' ' + op.summary, 'hint'));
      toc.appendChild(li);
      ops.appendChild(operation(doc, path, method, op, n));
      n++;
    }
  }
  $('toc').appendChild(toc);
  document.body.dataset.operations = String(n);
}

fetch('/openapi.json')
  .then((r) => { if (!r.ok) throw new Error('/openapi.json: HTTP ' + r.status); return r.json(); })
  .then(draw)
  .catch((e) => { $('about').textContent = 'Cannot read the API document: ' + e.message; });
