#!/usr/bin/env bash
# Every context switch on the machine for SECONDS, then the longest times a
# thread waited for a core (state R: preempted, runnable) or waited
# uninterruptibly (D), with the kernel stack it left from, and the longest
# runs without a break. For the hostile bench's spikes: run it while a
# phase runs (bench/hostile.sh prints when each phase starts).
#
#   bench/sched-waits.sh SECONDS [TOP]      (needs perf and root)
set -euo pipefail
secs=${1:?usage: bench/sched-waits.sh SECONDS [TOP]}
top=${2:-20}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
perf record -q -e sched:sched_switch -a -g -m 64M -o "$dir/sched.data" -- sleep "$secs"
perf script -i "$dir/sched.data" -F comm,tid,time,event,trace,ip,sym > "$dir/sched.txt" 2>/dev/null
python3 - "$dir/sched.txt" "$top" <<'PY'
import re, sys
switch = re.compile(r'prev_comm=(.*?) prev_pid=(\d+) prev_prio=\d+ '
                    r'prev_state=(\S+) ==> next_comm=(.*?) next_pid=(\d+)')
left = {}      # tid -> (time it left its core, state, comm, stack)
came = {}      # tid -> time it got a core
waits, runs = [], []
event, stack = None, []

def done():
    if event is None:
        return
    t, comm, tid, state, ncomm, ntid = event
    # tid 0 is every core's idle task: not one thread.
    left.pop(0, None)
    came.pop(0, None)
    if tid in came:
        runs.append((t - came.pop(tid), t, comm))
    left[tid] = (t, state, comm, stack[3:6])
    if ntid in left:
        t0, s0, c0, st0 = left.pop(ntid)
        if s0 not in ('S', 'I'):   # not a sleep of its own choosing
            waits.append((t - t0, t0, c0, s0, st0))
    came[ntid] = t

for line in open(sys.argv[1], errors='replace'):
    if 'sched:sched_switch' in line and not line.startswith('\t'):
        done()
        stack = []
        m = switch.search(line)
        t = float(re.search(r'\s(\d+\.\d+):', line).group(1))
        event = (t, m.group(1), int(m.group(2)), m.group(3), m.group(4), int(m.group(5))) if m else None
    elif line.strip():
        stack.append(line.strip().split(' ', 1)[-1].split('+')[0])
done()
top = int(sys.argv[2])
print('longest waits for a core (R) or uninterruptible (D), ms:')
for d, t, c, s, st in sorted(waits, key=lambda w: -w[0])[:top]:
    print(f'  {d * 1e3:8.2f}  at {t:.3f}  {c:<20} {s:<3} {" <- ".join(st)}')
print('longest runs without a break, ms (SCHED_IDLE threads included):')
for d, t, c in sorted(runs, key=lambda r: -r[0])[:top]:
    print(f'  {d * 1e3:8.2f}  ending {t:.3f}  {c}')
PY
