/**
 * A self-contained, interactive API reference at `GET /docs`: it reads `/v1/openapi.json` in the browser and
 * lists every operation with its parameters, body schema, responses and security. No external scripts or fonts,
 * so it works on an isolated network.
 */
export const API_REFERENCE_HTML = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Charger Platform API reference</title>
<style>
body{font:15px/1.45 system-ui,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
header{background:#1d2330;color:#fff;padding:16px 24px}header h1{font-size:20px;margin:0}
main{max-width:1100px;margin:0 auto;padding:16px 24px}
input{width:100%;padding:8px 10px;font-size:15px;border:1px solid #c8ccd4;border-radius:6px;margin:8px 0 16px}
details{background:#fff;border:1px solid #dde1e7;border-radius:6px;margin:6px 0}
summary{cursor:pointer;padding:8px 12px;display:flex;gap:12px;align-items:baseline}
.m{font:600 12px ui-monospace,monospace;padding:2px 6px;border-radius:4px;color:#fff;min-width:52px;text-align:center}
.GET{background:#2f6fdf}.POST{background:#1f9d55}.DELETE{background:#c53030}
.p{font-family:ui-monospace,monospace}.s{color:#5b6472}
.body{padding:0 16px 12px}pre{background:#f0f2f5;padding:8px;border-radius:4px;overflow:auto;font-size:12px}
h2{margin:24px 0 4px;font-size:16px;text-transform:capitalize}
</style></head>
<body><header><h1>Charger Platform API reference <span id="v" class="s"></span></h1></header>
<main><input id="q" placeholder="Filter by path, method or words" autofocus><div id="ops">Loading…</div></main>
<script>
const esc = (s) => String(s).replace(/[&<>"]/g, (c) => ({'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;'}[c]));
const json = (o) => '<pre>' + esc(JSON.stringify(o, null, 2)) + '</pre>';
fetch('/v1/openapi.json').then((r) => r.json()).then((doc) => {
  document.getElementById('v').textContent = 'v' + doc.info.version;
  const ops = [];
  for (const [path, item] of Object.entries(doc.paths))
    for (const [method, op] of Object.entries(item)) ops.push({ path, method: method.toUpperCase(), op });
  const render = (filter) => {
    const f = filter.toLowerCase();
    const groups = {};
    for (const o of ops) {
      const text = (o.method + ' ' + o.path + ' ' + (o.op.summary || '') + ' ' + (o.op.description || '')).toLowerCase();
      if (f && !text.includes(f)) continue;
      (groups[o.op.tags?.[0] || 'other'] ||= []).push(o);
    }
    document.getElementById('ops').innerHTML = Object.entries(groups).map(([tag, list]) =>
      '<h2>' + esc(tag) + '</h2>' + list.map((o) => {
        const sec = (o.op.security || []).map((s) => Object.entries(s).map(([k, v]) => k + (v.length ? ' (' + v.join(', ') + ')' : '')).join('')).join(', ') || 'none';
        const params = (o.op.parameters || []).map((p) => '<li><code>' + esc(p.name) + '</code> in ' + p.in + (p.required ? ', required' : '') + ' — ' + esc(JSON.stringify(p.schema)) + '</li>').join('');
        const body = o.op.requestBody ? '<p><b>Body</b></p>' + json(Object.values(o.op.requestBody.content)[0].schema) : '';
        const ok = o.op.responses['200']?.content ? '<p><b>200</b></p>' + json(Object.values(o.op.responses['200'].content)[0].schema) : '';
        const errs = Object.keys(o.op.responses).filter((k) => k !== '200').join(', ');
        return '<details><summary><span class="m ' + o.method + '">' + o.method + '</span><span class="p">' + esc(o.path) + '</span><span class="s">' + esc(o.op.summary || '') + '</span></summary><div class="body">' +
          (o.op.description ? '<p>' + esc(o.op.description) + '</p>' : '') + '<p><b>Security:</b> ' + esc(sec) + '</p>' +
          (params ? '<p><b>Parameters</b></p><ul>' + params + '</ul>' : '') + body + ok + '<p><b>Other responses:</b> ' + esc(errs) + '</p></div></details>';
      }).join('')).join('') || '<p>No operation matches.</p>';
  };
  render('');
  document.getElementById('q').addEventListener('input', (e) => render(e.target.value));
}).catch((e) => { document.getElementById('ops').textContent = 'Could not load /v1/openapi.json: ' + e; });
</script></body></html>`;
