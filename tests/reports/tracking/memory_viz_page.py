#!/usr/bin/env python3
"""Writes (to stdout) a page that reads a snapshot pickle with PyTorch
memory_viz's own code and puts what the viewer saw on <body data-result>:
how many timeline elements it made, how many of their tooltips say
"pool_id unknown" or "pool_id (0, 0)", the allocator settings it shows, and
whether segment_map events carry frames.

    memory_viz_page.py VIZ_DIR SNAPSHOT.pickle > page.html

VIZ_DIR holds torch/utils/viz/MemoryViz.js and process_alloc_data.js from a
PyTorch checkout (not part of this repository). MemoryViz.js imports d3 from
the network, so it is not loaded whole: its reader (unpickleData, or
unpickle in older versions) and annotate_snapshot() are taken out of it;
process_alloc_data.js has no imports and is inlined as it is, less its
export line."""
import base64
import json
import re
import sys


def function_source(src, name):
    """The text of `function NAME(...) {...}` at the start of a line in src,
    found by matching braces outside strings and comments; '' if absent."""
    m = re.search(r'^function %s\(' % re.escape(name), src, re.M)
    if not m:
        return ''
    i, depth, started = m.start(), 0, False
    while i < len(src):
        c = src[i]
        if c in '\'"':  # a string: to its closing quote
            j = i + 1
            while src[j] != c:
                j += 2 if src[j] == '\\' else 1
            i = j + 1
            continue
        if src.startswith('//', i):
            i = src.index('\n', i)
            continue
        if src.startswith('/*', i):
            i = src.index('*/', i) + 2
            continue
        if c == '{':
            depth += 1
            started = True
        elif c == '}':
            depth -= 1
            if started and depth == 0:
                return src[m.start():i + 1]
        i += 1
    raise SystemExit('memory_viz_page: unbalanced braces in function %s' % name)


def main():
    viz, snapshot = sys.argv[1], sys.argv[2]
    mv = open(viz + '/MemoryViz.js', encoding='utf-8').read()
    pad = open(viz + '/process_alloc_data.js', encoding='utf-8').read()
    pad = re.sub(r'^export\s*\{[^}]*\};?\s*$', '', pad, flags=re.M)
    reader = 'unpickleData' if function_source(mv, 'unpickleData') else 'unpickle'
    parts = [function_source(mv, n) for n in ('version_space', reader, 'annotate_snapshot')]
    if not all(parts):
        raise SystemExit('memory_viz_page: %s/MemoryViz.js lacks version_space, %s or annotate_snapshot'
                         % (viz, reader))
    data = base64.b64encode(open(snapshot, 'rb').read()).decode()
    probe = '''
(function () {
  var res;
  try {
    const bin = atob(SNAPSHOT_B64), buf = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) buf[i] = bin.charCodeAt(i);
    const snap = READER(buf.buffer);
    annotate_snapshot(snap);
    const data = process_alloc_data(snap, 0, false, 15000);
    let unknown = 0, p00 = 0;
    for (let i = 0; i < data.elements_length; i++) {
      const t = data.context_for_id(i);
      if (t.includes('pool_id unknown')) unknown++;
      if (t.includes('pool_id (0, 0)')) p00++;
    }
    const maps = snap.device_traces[0].filter(e => e.action === 'segment_map');
    res = {elements: data.elements_length, pool_unknown: unknown, pool_00: p00,
           settings: snap.allocator_settings, segment_maps: maps.length,
           segment_maps_with_frames: maps.filter(e => e.frames.length > 0).length};
  } catch (e) {
    res = {error: String((e && e.stack) || e)};
  }
  document.body.setAttribute('data-result', JSON.stringify(res));
})();
'''.replace('READER', reader)
    # '</' never appears in the JSON below; the viewer's code is checked.
    code = '\n'.join([pad] + parts + ['const SNAPSHOT_B64 = %s;' % json.dumps(data), probe])
    if '</script' in code.lower():
        raise SystemExit('memory_viz_page: the viewer code holds </script')
    sys.stdout.write('<!DOCTYPE html>\n<html><head><meta charset="utf-8"></head><body>\n<script>\n%s\n</script>\n'
                     '</body></html>\n' % code)


main()
