#!/bin/bash
# usage: batch.sh store name1 params1 name2 params2 ... ; runs 2 at a time
store=$1; shift
while [ $# -gt 0 ]; do
  n1=$1; p1=$2; shift 2
  PYTHONPATH=src /work/main/.venv/bin/python benchmarks/results/2026-11-27-ranker-s18/sweep.py --store $store --name $n1 --params "$p1" --per /tmp/$n1.pkl > /tmp/$n1.log 2>&1 &
  if [ $# -gt 0 ]; then n2=$1; p2=$2; shift 2
  PYTHONPATH=src /work/main/.venv/bin/python benchmarks/results/2026-11-27-ranker-s18/sweep.py --store $store --name $n2 --params "$p2" --per /tmp/$n2.pkl > /tmp/$n2.log 2>&1 &
  fi
  wait
done
