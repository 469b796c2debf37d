#!/bin/bash
# One core a run, as the pilot: core 0 vLLM (grpo, then mcs-4), core 1 hf (grpo), concurrently; seed 98 (neither
# the pilot's seeds 0-1 nor the lr screen's 99), train reward only plus a 16-problem held-out evaluation for its rate.
cd "$(dirname "$0")/../../.."
OUT=${1:-/tmp/vl}; mkdir -p $OUT
PRE=$(.venv/bin/python -m sveb.engines.cpu_libs)
common="--cuts 1 --steps 2 --seed 98 --eval-every 2 --eval-problems 16 --train-pool 371 --train-layers 4 --batch-size 8 --dtype float32 --lr 1e-5"
( for b in grpo mcs-4; do
    /usr/bin/time -v env OMP_NUM_THREADS=1 VLLM_CPU_OMP_THREADS_BIND=0 LD_PRELOAD="$PRE" taskset -c 0 .venv/bin/sveb rl --engine vllm --baseline $b $common --out $OUT/vllm-$b > $OUT/vllm-$b.log 2>&1
  done ) &
( /usr/bin/time -v env OMP_NUM_THREADS=1 taskset -c 1 .venv/bin/sveb rl --engine hf --baseline grpo $common --out $OUT/hf-grpo > $OUT/hf-grpo.log 2>&1 ) &
wait
for f in $OUT/*/log.jsonl; do echo "== $f"; cat $f; done
