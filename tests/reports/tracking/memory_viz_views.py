#!/usr/bin/env python3
"""Writes (to stdout) a page that runs PyTorch memory_viz whole (MemoryViz.js
as it is, its views, its event handlers) on a snapshot pickle, opens every
view the viewer offers in turn and puts what each showed on
<body data-result> as JSON: {view: {error, shapes, hovered, with_stack,
sample}} plus the page's script errors.

    memory_viz_views.py VIZ_DIR D3_V5.js SNAPSHOT.pickle [VIEW] > page.html

(VIEW: open that view only, and leave it on screen for a screenshot.)

VIZ_DIR holds torch/utils/viz/MemoryViz.js (and, for versions that import
it, process_alloc_data.js) from a PyTorch checkout; D3_V5.js is d3 v5's UMD
bundle (npm d3@5, dist/d3.min.js). Neither is part of this repository.
MemoryViz.js imports d3 from a CDN; the page has no network, so those
imports are bound to the local d3 instead, and nothing else is changed.

A view counts as rendered when it drew shapes (timeline polygons, segment
and block rectangles); for each of up to 200 of them the probe sends the
viewer a mouseover, as a user hovering, and counts the stacks it printed
(text holding file:line:function, not the viewer's "no frames" note)."""
import base64
import json
import re
import sys


def viewer_module(viz):
    mv = open(viz + '/MemoryViz.js', encoding='utf-8').read()
    names = set()
    for m in re.finditer(r'^import\s+(.*?)\s+from\s+["\']([^"\']+)["\'];?\s*$', mv, re.M):
        what, src = m.group(1), m.group(2)
        if src.startswith('./'):  # the viewer's own helpers: inlined, less their exports
            helper = open(viz + '/' + src[2:], encoding='utf-8').read()
            helper = re.sub(r'^export\s*\{[^}]*\};?\s*$', '', helper, flags=re.M)
            names.add(('inline', helper))
        elif what.startswith('* as '):
            names.add(('ns', what[5:].strip()))
        else:
            for part in what.strip('{} ').split(','):
                part = part.strip()
                if part:
                    names.add(('name', part))
    mv = re.sub(r'^import\s+.*?\s+from\s+["\'][^"\']+["\'];?\s*$', '', mv, flags=re.M)
    prelude = []
    for kind, v in sorted(names):
        if kind == 'ns':
            prelude.append('const %s = window.d3;' % v)
        elif kind == 'name':
            src, _, alias = v.partition(' as ')
            prelude.append('const %s = window.d3.%s;' % ((alias or src).strip(), src.strip()))
        else:
            prelude.append(v)
    # 'use strict' stays first; the bindings follow it
    return mv.replace("'use strict';", "'use strict';\n" + '\n'.join(prelude), 1), mv


PROBE = r'''
const VIEW_NAMES = ONLY_VIEW ? [ONLY_VIEW] : Object.keys(kinds);
const RESULT = {views: {}, view_names: VIEW_NAMES};
function visible_div() {
  const divs = Array.from(document.body.children).filter(
      d => d.tagName === 'DIV' && d.style.display !== 'none' && d.querySelector('svg'));
  return divs[divs.length - 1];
}
function probe_view(name) {
  const r = {shapes: 0, hovered: 0, with_stack: 0, sample: ''};
  const div = visible_div();
  if (!div) { r.error = 'no view drawn'; return r; }
  const shapes = Array.from(div.querySelectorAll('svg polygon, svg rect')).filter(s => {
    const d = s.__data__;
    // the viewer's own shapes carry data: allocations, segments, blocks
    return d && d.elem !== 'summarized' && (d.elem !== undefined || d.addr !== undefined);
  });
  r.shapes = shapes.length;
  // the state history also lists the trace's events, each hoverable
  const events = Array.from(div.querySelectorAll('pre')).filter(p => p.__data__ && p.__data__.action);
  r.events = events.length;
  const items = shapes.concat(events), texts = Array.from(div.querySelectorAll('pre'));
  const every = Math.max(1, Math.floor(items.length / 300)); // up to 300, spread over all
  for (const s of items.filter((_, i) => i % every === 0)) {
    // mouseover alone: the viewer writes this item's text (a mouseleave would put
    // back the selected event's stack and count it again)
    s.dispatchEvent(new MouseEvent('mouseover', {bubbles: true}));
    const t = texts.filter(p => !p.__data__).map(p => p.textContent).join('\n');
    r.hovered++;
    if (/:\d+:\S/.test(t) && !/allocated before _record_history|has no frames|no frames recorded/.test(t)) {
      r.with_stack++;
      if (!r.sample) r.sample = t.slice(0, 400);
    } else { // what was shown without a stack: segment, block, allocation or event:ACTION
      const d = s.__data__, what = d.action ? 'event:' + d.action : d.elem !== undefined ? 'allocation'
          : d.real_size !== undefined ? 'block' : 'segment';
      r.no_stack = r.no_stack || {};
      r.no_stack[what] = (r.no_stack[what] || 0) + 1;
    }
  }
  return r;
}
let step = 0, waited = 0;
function drawn() {
  const div = visible_div();
  return div && div.querySelector('svg polygon, svg rect');
}
function next() {
  if (step > 0 && !drawn() && waited++ < 20) { // a long trace's state history draws late
    setTimeout(next, 500);
    return;
  }
  waited = 0;
  if (step > 0) {
    const name = VIEW_NAMES[step - 1];
    try { RESULT.views[name] = probe_view(name); }
    catch (e) { RESULT.views[name] = {error: String((e && e.stack) || e)}; }
  }
  if (step === VIEW_NAMES.length) {
    RESULT.errors = PAGE_ERRORS;
    document.body.setAttribute('data-result', JSON.stringify(RESULT));
    window.scrollTo(0, 0); // the state history scrolls its last event into view
    return;
  }
  const name = VIEW_NAMES[step++];
  try { add_local_files([{name: 'snapshot', base64: SNAPSHOT_B64}], name); }
  catch (e) { PAGE_ERRORS.push(name + ': ' + String((e && e.stack) || e)); }
  setTimeout(next, 500); // the state history draws on the next animation frame
}
setTimeout(next, 0);
'''


def main():
    viz, d3, snapshot = sys.argv[1:4]
    only = sys.argv[4] if len(sys.argv) > 4 else None
    module, _ = viewer_module(viz)
    if not re.search(r'^const kinds = \{', module, re.M):
        raise SystemExit('memory_viz_views: %s/MemoryViz.js has no `const kinds = {` (its list of views)' % viz)
    data = base64.b64encode(open(snapshot, 'rb').read()).decode()
    lib = open(d3, encoding='utf-8').read()
    module += '\nconst SNAPSHOT_B64 = %s;\nconst ONLY_VIEW = %s;\n%s' % (json.dumps(data), json.dumps(only), PROBE)
    for code in (lib, module):
        if '</script' in code.lower():
            raise SystemExit('memory_viz_views: the code to inline holds </script')
    sys.stdout.write(
        '<!DOCTYPE html>\n<html><head><meta charset="utf-8"></head><body>\n'
        '<script>const PAGE_ERRORS = [];\n'
        'window.addEventListener("error", e => PAGE_ERRORS.push(String(e.message)));\n'
        'window.addEventListener("unhandledrejection", e => PAGE_ERRORS.push(String(e.reason)));\n'
        'const console_error = console.error;\n'
        'console.error = (...a) => { PAGE_ERRORS.push(a.join(" ")); console_error(...a); };\n'
        '</script>\n<script>\n%s\n</script>\n<script type="module">\n%s\n</script>\n</body></html>\n'
        % (lib, module))


main()
