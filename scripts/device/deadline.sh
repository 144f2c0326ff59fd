# Sourced by the device scripts: a deadline for the whole call and a runner that cuts each step at it, so a
# call that runs long still returns $OUT (only a few files come back a call: scripts tar their logs).
# Needs L (the log folder) and OUT; BUDGET_S (seconds from sourcing) sets the deadline.
T0=$(date +%s); DEADLINE=$((T0 + ${BUDGET_S:-360}))
stamp() { echo "$1 at $(( $(date +%s) - T0 )) s" | tee -a $OUT/summary; }
left() { local l=$(( DEADLINE - $(date +%s) )); [ $l -lt $1 ] && echo $l || echo $1; }
run() {  # run NAME SECONDS CMD...: pinned to $CORES, cut at the deadline
  local name=$1 t; t=$(left $2); shift 2
  [ "$t" -le 5 ] && { stamp "$name skipped (deadline)"; return; }
  timeout $t taskset -c ${CORES:-0-3} "$@" > $L/$name.log 2>&1; stamp "$name exit $?"
}
