# callgrind-names.py CALLGRIND_OUT PERF_MAP [N]: the N costliest functions of a
# callgrind profile, with JIT code (shown as ???) named from a perf map
# (Wasmtime writes /tmp/perf-PID.map when EDGE_PERFMAP=1).
import sys, subprocess, bisect, re
out = subprocess.run(["callgrind_annotate", "--threshold=100", "--inclusive=no", sys.argv[1]], capture_output=True, text=True).stdout
syms = []
for l in open(sys.argv[2]):
    a, sz, name = l.split(" ", 2)
    syms.append((int(a, 16), int(sz, 16), name.strip()))
syms.sort()
starts = [s[0] for s in syms]
tot = None
agg = {}
for l in out.splitlines():
    m = re.match(r"\s*([\d,]+) \(\s*[\d.]+%\)\s+(\S+)", l)
    if not m: continue
    n = int(m.group(1).replace(",", "")); f = m.group(2)
    if f == "PROGRAM": tot = n; continue
    mm = re.match(r"\?\?\?:0x([0-9a-f]+)", f)
    if mm:
        a = int(mm.group(1), 16); i = bisect.bisect_right(starts, a) - 1
        if i >= 0 and syms[i][0] <= a < syms[i][0] + syms[i][1]:
            f = syms[i][2]
    f = re.sub(r"::h[0-9a-f]{16}$", "", f)
    f = re.sub(r"^wasm\[0\]::function\[\d+\]::", "", f)
    agg[f] = agg.get(f, 0) + n
tot = tot or sum(agg.values())
print(f"total {tot/1e9:.3f} G")
for f, n in sorted(agg.items(), key=lambda x: -x[1])[:int(sys.argv[3]) if len(sys.argv) > 3 else 30]:
    print(f"{n/1e6:10.1f} M {n/tot*100:5.1f}%  {f[:110]}")
