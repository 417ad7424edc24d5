#!/bin/bash
# The example sbatch scripts (docs/examples/*.sbatch) run end to end under a
# simulated Slurm job: the SLURM_* variables a 1-node x 4-GPU allocation sets,
# `srun` shimmed to `mpirun --oversubscribe` and `scontrol show hostnames` to
# localhost, `paratune tune` with the MPI/CPU backend (real MPI processes:
# profile, plan, confirm). The training launch is the only stand-in: it records
# the command line the script would start, which is then checked against the
# exports and against Megatron-LM's start-up rules.
#
# usage: sbatch_e2e_test.sh PARATUNE_EXE SOURCE_DIR
set -euo pipefail
paratune=$1
src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

mkdir -p "$work/bin"
cat > "$work/bin/srun" <<'SH'
#!/bin/bash
# srun [options] command...: one process per task, through mpirun.
n=${SLURM_NTASKS:-1}
per_node=""
while [ $# -gt 0 ]; do
  case $1 in
    -n) n=$2; shift 2 ;;
    --ntasks=*) n=${1#*=}; shift ;;
    --ntasks-per-node=*) per_node=${1#*=}; shift ;;
    -N|--nodes) shift 2 ;;
    --*) shift ;;
    *) break ;;
  esac
done
[ -n "$per_node" ] && n=$((per_node * ${SLURM_NNODES:-1}))
exec mpirun --oversubscribe --allow-run-as-root -np "$n" \
  --mca btl self,vader,tcp --mca btl_vader_single_copy_mechanism none "$@"
SH
cat > "$work/bin/scontrol" <<'SH'
#!/bin/bash
[ "$1 $2" = "show hostnames" ] && { echo localhost; exit 0; }
echo "scontrol shim: $*" >&2; exit 1
SH
cat > "$work/record-launch" <<'SH'
#!/bin/bash
# Stands in for the training launcher: records the command line, one word a line.
printf '%s\n' "$@" > "$RECORD"
SH
chmod +x "$work/bin/srun" "$work/bin/scontrol" "$work/record-launch"
cat > "$work/tiny.json" <<'JSON'
{"name": "tiny-gpt", "layers": 4, "hidden": 256, "heads": 8, "ffn_hidden": 1024, "vocab": 2048,
 "norm": "layernorm", "linear_bias": true, "max_seq_len": 128}
JSON

export PATH="$work/bin:$PATH"
export SLURM_JOB_ID=4242 SLURM_JOB_NAME=e2e SLURM_NNODES=1 SLURM_JOB_NUM_NODES=1 \
  SLURM_NTASKS=4 SLURM_NTASKS_PER_NODE=4 SLURM_GPUS_ON_NODE=4 SLURM_JOB_NODELIST=localhost \
  SLURM_SUBMIT_DIR="$work"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export PARATUNE="$paratune" MODEL="$work/tiny.json" GLOBAL_BATCH=8 SEQ=128 PRECISION=fp32 \
  BACKEND=mpi-cpu CONFIRM_TOP=2 CACHE_DIR="$work/cache" TRAIN_LAUNCHER="$work/record-launch"

words() { tr '\n' ' ' < "$1"; }

# --- Megatron-LM ---------------------------------------------------------
export OUT_DIR="$work/megatron" RECORD="$work/megatron.cmd" TRAIN_SCRIPT=pretrain_gpt.py
bash "$src/docs/examples/megatron.sbatch" > "$work/megatron.log" 2>&1 || { cat "$work/megatron.log"; fail "megatron.sbatch exited $?"; }
[ -s "$RECORD" ] || fail "megatron.sbatch never launched training"
# shellcheck source=/dev/null
source "$OUT_DIR/env.sh"
[ $((TP * PP * CP * DP)) -eq 4 ] || fail "TP*PP*CP*DP = $((TP * PP * CP * DP)), not the 4 tasks"
cmd=" $(words "$RECORD")"
for want in "--tensor-model-parallel-size $TP " "--pipeline-model-parallel-size $PP " \
            "--micro-batch-size $MBS " "--global-batch-size $GBS " "--num-layers 4 " \
            "--hidden-size 256 " "--num-attention-heads 8 " "--seq-length 128 "; do
  case $cmd in *" $want"*) ;; *) fail "the Megatron launch lacks '$want': $cmd" ;; esac
done
[ "$GBS" = 8 ] || fail "GBS=$GBS"
[ $((GBS % (MBS * DP))) -eq 0 ] || fail "GBS % (MBS*DP) != 0 (num_microbatches_calculator.py:381)"
[ $((8 % TP)) -eq 0 ] || fail "heads % TP != 0 (transformer_config.py:1446)"
[ $((4 % PP)) -eq 0 ] || fail "layers % PP != 0 (arguments.py:990)"
grep -q '"source": "slurm (SLURM_JOB_NUM_NODES, SLURM_GPUS_ON_NODE)"' "$OUT_DIR/tune.json" || fail "allocation not from Slurm: $(cat "$OUT_DIR/tune.json")"
grep -q '"profile": "measured"' "$OUT_DIR/tune.json" || fail "the first job should have measured the profile"
grep -q '"chosen_by": "measured"' "$OUT_DIR/tune.json" || fail "the choice should come from the confirmation run"
grep -q '"schema": "paratune.run_report/v2"' "$OUT_DIR/run_report.json" || fail "no run report"
grep -q 'from slurm' "$work/megatron.log" || fail "tune did not say where the allocation came from"
grep -q '"default_format": "megatron"' "$OUT_DIR/tune.json" || fail "a --framework megatron plan should emit megatron"
echo "megatron: TP=$TP PP=$PP CP=$CP DP=$DP MBS=$MBS GBS=$GBS RECOMPUTE=$RECOMPUTE"

# --- DeepSpeed (the profile is reused from the cache now) -----------------
export OUT_DIR="$work/deepspeed" RECORD="$work/deepspeed.cmd" TRAIN_SCRIPT=pretrain_gpt.py CONFIRM_TOP=1
bash "$src/docs/examples/deepspeed.sbatch" > "$work/deepspeed.log" 2>&1 || { cat "$work/deepspeed.log"; fail "deepspeed.sbatch exited"; }
source "$OUT_DIR/env.sh"
grep -q '"profile": "reused"' "$OUT_DIR/tune.json" || fail "the second job should reuse the cached profile"
grep -q '"default_format": "megatron-deepspeed"' "$OUT_DIR/tune.json" || fail "a megatron-deepspeed plan should emit megatron_deepspeed.sh"
cmd=" $(words "$RECORD")"
case $cmd in *" --deepspeed_config ds_config.json "*) ;; *) fail "no ds_config in: $cmd" ;; esac
case $cmd in *" --zero-stage $ZERO_STAGE "*) ;; *) fail "no --zero-stage in: $cmd" ;; esac
# DeepSpeed's batch identity (runtime/config.py:937): train = micro x accumulation x DP.
ds=$(tr -d ' \n' < "$OUT_DIR/ds_config.json")
train=$(sed -n 's/.*"train_batch_size":\([0-9]*\).*/\1/p' <<<"$ds")
micro=$(sed -n 's/.*"train_micro_batch_size_per_gpu":\([0-9]*\).*/\1/p' <<<"$ds")
gas=$(sed -n 's/.*"gradient_accumulation_steps":\([0-9]*\).*/\1/p' <<<"$ds")
[ "$train" -eq $((micro * gas * DP)) ] || fail "ds_config: $train != $micro x $gas x $DP"
echo "deepspeed: ZERO_STAGE=$ZERO_STAGE TP=$TP PP=$PP DP=$DP train=$train micro=$micro gas=$gas"

# --- AxoNN ---------------------------------------------------------------
export OUT_DIR="$work/axonn" RECORD="$work/axonn.cmd" TRAIN_SCRIPT=train_axonn.py
bash "$src/docs/examples/axonn.sbatch" > "$work/axonn.log" 2>&1 || { cat "$work/axonn.log"; fail "axonn.sbatch exited"; }
source "$OUT_DIR/env.sh"
grep -q '"default_format": "axonn"' "$OUT_DIR/tune.json" || fail "an axonn plan should emit axonn"
[ $((GX * GY * GZ * DP)) -eq 4 ] || fail "AxoNN grid $GX x $GY x $GZ x $DP is not 4 (communication.py:58)"
grep -q "G_intra_c=$GX," "$OUT_DIR/axonn.py" || fail "axonn.py disagrees with GX=$GX"
grep -q "G_data=$DP," "$OUT_DIR/axonn.py" || fail "axonn.py disagrees with DP=$DP"
cmd=" $(words "$RECORD")"
case $cmd in *" --global-batch-size $GBS --micro-batch-size $MBS "*) ;; *) fail "axonn launch: $cmd" ;; esac
echo "axonn: GX=$GX GY=$GY GZ=$GZ DP=$DP MBS=$MBS"
echo PASS
