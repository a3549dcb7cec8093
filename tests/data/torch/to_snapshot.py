#!/usr/bin/env python3
"""A run recorded by record_alloc.so with RECORD_ALLOC_FRAMES (a CSV whose
allocate rows carry a stack id, and the stacks' frames) as a PyTorch memory
snapshot, the format torch.cuda.memory._dump_snapshot() writes: its trace
with each allocation's Python frames (innermost first), a ProfilerStep#N
annotation at each iteration row, no segments (a CPU run has none). Also
writes the trace without frames (RMM's six columns) beside it, so the same
run can be read by sizes alone.

  to_snapshot.py RUN.csv FRAMES.txt OUT.pickle.gz OUT.csv.gz
"""
import csv
import gzip
import pickle
import sys


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    run, frames_path, out_pickle, out_csv = sys.argv[1:]
    stacks = {}
    for line in open(frames_path):
        sid, text = line.rstrip("\n").split("\t", 1)
        stacks[sid] = [dict(zip(("name", "filename", "line"), f.rsplit("|", 2))) for f in text.split(";")]
        for f in stacks[sid]:
            f["line"] = int(f["line"])
    trace, notes, sizes = [], [], {}
    with open(run) as f, gzip.open(out_csv, "wt", compresslevel=9) as plain:
        rows = csv.reader(f)
        plain.write(",".join(next(rows)) + "\n")
        for row in rows:
            plain.write(",".join(row[:6]) + "\n")
            t = len(trace) + len(notes)  # one tick per entry: the order is the time
            if row[2] == "iteration":
                notes.append({"name": f"ProfilerStep#{row[4]}", "stage": "START", "time_us": t, "device": 0})
                continue
            addr, size = int(row[3], 16), int(row[4])
            action = "alloc" if row[2] == "allocate" else "free_completed"
            frames = stacks.get(row[6], []) if len(row) > 6 else []
            trace.append({"action": action, "addr": addr, "size": size, "stream": 0, "time_us": t,
                          "frames": frames})
    snap = {"segments": [], "device_traces": [trace], "external_annotations": notes,
            "allocator_settings": {}}
    with gzip.GzipFile(out_pickle, "wb", compresslevel=9, mtime=0) as out:
        pickle.dump(snap, out, protocol=4)


if __name__ == "__main__":
    main()
