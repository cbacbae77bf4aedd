# The `tilebsp` tool end to end on a small model (tests/fuzz/corpus/onnx_model/conv_initializers.onnx: Conv with
# weights and bias, then Relu, symbolic batch): info, run with --inputs/--outdir, convert and run DIR (which loads
# the executable instead of compiling), and the bad inputs it must refuse by name with exit code 1 or 2.
# Run: cmake -DTOOL=<tilebsp> -DMODEL=<model.onnx> -DWORK_DIR=<dir> -DPYTHON=<python3 with numpy> -P check_cli.cmake
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
function(tool expect_rc pattern)
  execute_process(COMMAND ${TOOL} ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL expect_rc OR NOT "${out}${err}" MATCHES "${pattern}")
    message(FATAL_ERROR "tilebsp ${ARGN}: exit ${rc} (expected ${expect_rc}), output:\n${out}${err}\n(expected to match: ${pattern})")
  endif()
  message(STATUS "tilebsp ${ARGN}: exit ${rc} as expected")
endfunction()
# Fails with `message` unless the runs written to folders a and b under WORK_DIR gave bitwise the same y.npy.
function(same_output a b message)
  execute_process(COMMAND ${PYTHON} -c "
import numpy as np
assert np.array_equal(np.load('${WORK_DIR}/${a}/y.npy'), np.load('${WORK_DIR}/${b}/y.npy'))
" RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${message}")
  endif()
endfunction()
execute_process(COMMAND ${PYTHON} -c "
import numpy as np
np.save('${WORK_DIR}/x.npy', (np.arange(2 * 3 * 4 * 4, dtype=np.float32).reshape(2, 3, 4, 4) / 20 - 1))
np.save('${WORK_DIR}/wrong.npy', np.zeros((2, 3, 5, 4), dtype=np.float32))
np.save('${WORK_DIR}/ints.npy', np.zeros((2, 3, 4, 4), dtype=np.int64))
open('${WORK_DIR}/cut.npy', 'wb').write(open('${WORK_DIR}/x.npy', 'rb').read()[:100])
" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "could not write the inputs with ${PYTHON}")
endif()
tool(0 "input: x float \\[N, 3, 4, 4\\].*Conv +1  supported.*multiply-adds per item: 864 .*supported: yes" info ${MODEL})
tool(0 "written to .*throughput_items_per_s: [0-9.]+" run ${MODEL} --batch-size 2 --inputs ${WORK_DIR}/x.npy --outdir ${WORK_DIR}/out --iterations 2)
# The outputs against plain NumPy: conv 3x3 pad 1 of the model's weights (arange / 50) and bias, then ReLU.
execute_process(COMMAND ${PYTHON} -c "
import numpy as np
x = np.load('${WORK_DIR}/x.npy'); y = np.load('${WORK_DIR}/out/y.npy')
w = np.arange(2 * 3 * 3 * 3, dtype=np.float64).reshape(2, 3, 3, 3) / 50; b = np.array([0.5, -0.5])
p = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
ref = np.zeros((2, 2, 4, 4))
for i in range(4):
    for j in range(4):
        ref[:, :, i, j] = np.einsum('nckl,ockl->no', p[:, :, i:i + 3, j:j + 3], w) + b
ref = np.maximum(ref, 0)
err = np.abs(y - ref).max()
print('max error', err)
assert y.shape == (2, 2, 4, 4) and err < 1e-5, err
" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "tilebsp run: y.npy differs from NumPy's result")
endif()
# Huge pages for the heap (samples::use_huge_pages: the tool executes itself again with glibc.malloc.hugetlb=1): on
# where the kernel has transparent huge pages and glibc (2.35 or later) the tunable, off with TILEBSP_HUGE_PAGES=0;
# the outputs bitwise the same.
set(want_huge off)
execute_process(COMMAND getconf GNU_LIBC_VERSION OUTPUT_VARIABLE libc ERROR_QUIET)
if(EXISTS /sys/kernel/mm/transparent_hugepage/enabled AND libc MATCHES "glibc ([0-9]+)\\.([0-9]+)")
  set(major ${CMAKE_MATCH_1})
  set(minor ${CMAKE_MATCH_2})
  file(READ /sys/kernel/mm/transparent_hugepage/enabled thp)
  if(NOT thp MATCHES "\\[never\\]" AND (major GREATER 2 OR minor GREATER_EQUAL 35))
    set(want_huge on)
  endif()
endif()
if(NOT "$ENV{GLIBC_TUNABLES}" STREQUAL "")  # the user's tunables decide
  set(want_huge "(on|off)")
endif()
tool(0 "startup: .* huge_pages ${want_huge}" run ${MODEL} --batch-size 2 --inputs ${WORK_DIR}/x.npy --outdir ${WORK_DIR}/out_huge --iterations 1)
execute_process(COMMAND ${CMAKE_COMMAND} -E env TILEBSP_HUGE_PAGES=0 ${TOOL} run ${MODEL} --batch-size 2 --inputs ${WORK_DIR}/x.npy
                        --outdir ${WORK_DIR}/out_small --iterations 1 RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "startup: .* huge_pages off")
  message(FATAL_ERROR "TILEBSP_HUGE_PAGES=0 tilebsp run: exit ${rc}, output:\n${out}${err}\n(expected huge_pages off)")
endif()
same_output(out_huge out_small "tilebsp run: the outputs with and without huge pages differ")
tool(0 "converted: " convert ${MODEL} --batch-size 2 --outdir ${WORK_DIR}/converted)
tool(0 "executable loaded from cache" run ${WORK_DIR}/converted --inputs ${WORK_DIR}/x.npy --iterations 1)
# Bad input: each refused by name, before anything is built.
tool(1 "input 'x' is \\[2, 3, 4, 4\\] but .*wrong.npy holds \\[2, 3, 5, 4\\]" run ${MODEL} --batch-size 2 --inputs ${WORK_DIR}/wrong.npy)
tool(1 "input 'x' is float but .*ints.npy holds int64" run ${MODEL} --batch-size 2 --inputs ${WORK_DIR}/ints.npy)
tool(1 "cut.npy: not a valid .npy file" run ${MODEL} --batch-size 2 --inputs ${WORK_DIR}/cut.npy)
tool(1 "not an ONNX model" run ${WORK_DIR}/x.npy)
tool(2 "the model has no input 'nothing'" run ${MODEL} --inputs nothing=${WORK_DIR}/x.npy)
tool(2 "--precision-mode must be FP32 or FP16" run ${MODEL} --precision-mode FP8)
tool(2 "is not a folder written by tilebsp convert" run ${WORK_DIR}/out)
# Options from a JSON config file (ipu_saved_model_cli's --config_file), convert's options.json read back, the IPU
# options, and those this version refuses by name.
file(WRITE ${WORK_DIR}/config.json "{\"batch_size\": 2, \"num_ipus\": 2, \"manual_sharding\": [\"Conv\"], \"iterations\": 1}")
tool(0 "target 2 x IPU Mk2.*batch 2.*throughput_items_per_s" run ${MODEL} --config-file ${WORK_DIR}/config.json --inputs ${WORK_DIR}/x.npy)
tool(0 "converted: " convert ${MODEL} --config_file ${WORK_DIR}/config.json --precision_mode FP16 --outdir ${WORK_DIR}/converted2)
file(READ ${WORK_DIR}/converted2/options.json saved)
if(NOT saved MATCHES "\"batch_size\": 2" OR NOT saved MATCHES "\"precision_mode\": \"FP16\"" OR NOT saved MATCHES "\"manual_sharding\": \\[\"Conv\"\\]")
  message(FATAL_ERROR "convert's options.json lacks the options given:\n${saved}")
endif()
tool(0 "target 2 x IPU Mk2.*FP16.*executable loaded from cache" run ${WORK_DIR}/converted2 --inputs ${WORK_DIR}/x.npy --iterations 1)
file(WRITE ${WORK_DIR}/bad.json "{\"batch_size\": 2,}")
tool(2 "bad.json: not valid JSON at offset 17" run ${MODEL} --config-file ${WORK_DIR}/bad.json)
tool(2 "manual_sharding names 3 shards but the target has 2 IPUs" run ${MODEL} --num-ipus 2 --manual-sharding a,b,c --batch-size 2)
# Pipelines (--pipeline-cfg: auto writes a solution, load reads it back, convert stores it) and replicas: the
# outputs are bitwise those of one IPU.
file(WRITE ${WORK_DIR}/pipe.json "{\"converter\": \"auto\", \"min_ipu_quantity\": 2, \"max_ipu_quantity\": 2, \"solution_dir\": \"${WORK_DIR}/solution\"}")
tool(2 "no IPU count in \\[2, 2\\] suits 1 micro-batches per run" run ${MODEL} --batch-size 2 --pipeline-cfg ${WORK_DIR}/pipe.json)
tool(0 "solution written to .*pipelined in 2 stages.*throughput_items_per_s" run ${MODEL} --batch-size 2 --batch-per-step 2
     --pipeline-cfg ${WORK_DIR}/pipe.json --inputs ${WORK_DIR}/x.npy --outdir ${WORK_DIR}/out_pipe --iterations 1)
file(WRITE ${WORK_DIR}/load.json "{\"converter\": \"load\", \"solution_path\": \"${WORK_DIR}/solution/conv_initializers.pipeconfig\"}")
tool(0 "converted: " convert ${MODEL} --batch-size 2 --batch-per-step 2 --pipeline-cfg ${WORK_DIR}/load.json --outdir ${WORK_DIR}/converted3)
tool(0 "pipelined in 2 stages.*executable loaded from cache" run ${WORK_DIR}/converted3 --inputs ${WORK_DIR}/x.npy --iterations 1)
tool(0 "2 replicas.*output y \\[4, 2, 4, 4\\]" run ${MODEL} --batch-size 2 --replicas 2 --inputs ${WORK_DIR}/x.npy
     --outdir ${WORK_DIR}/out_rep --iterations 1)
execute_process(COMMAND ${PYTHON} -c "
import numpy as np
y = np.load('${WORK_DIR}/out/y.npy'); p = np.load('${WORK_DIR}/out_pipe/y.npy'); r = np.load('${WORK_DIR}/out_rep/y.npy')
assert np.array_equal(p, y) and np.array_equal(r[:2], y) and np.array_equal(r[2:], y)
" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "tilebsp run: the pipelined or replicated outputs differ from one IPU's")
endif()
tool(2 "--pipeline-cfg: 2 stages need at least as many micro-batches per run; give --batch-per-step 2 or more" run ${MODEL}
     --batch-size 2 --pipeline-cfg ${WORK_DIR}/load.json)
file(WRITE ${WORK_DIR}/pipe_bad.json "{\"converter\": \"manual\", \"stages\": 2}")
tool(2 "pipe_bad.json: unknown pipeline_cfg key \"stages\"" run ${MODEL} --pipeline-cfg ${WORK_DIR}/pipe_bad.json)
file(WRITE ${WORK_DIR}/solution_bad.json "{\"nodes\": 3, \"stages\": [{\"first_node\": 0}]}")
file(WRITE ${WORK_DIR}/load_bad.json "{\"converter\": \"load\", \"solution_path\": \"${WORK_DIR}/solution_bad.json\"}")
tool(2 "solution_bad.json: the solution is for a model of 3 nodes, but .*conv_initializers.onnx has 2" run ${MODEL}
     --batch-size 2 --pipeline-cfg ${WORK_DIR}/load_bad.json)
tool(2 "--pipeline-cfg: cannot read 'nowhere.json'" run ${MODEL} --pipeline-cfg nowhere.json)
# Nodes run on the host (--excluded-nodes): the ReLU, exactly as on the tiles; a convolution is refused by name.
tool(0 "throughput_items_per_s" run ${MODEL} --batch-size 2 --excluded_nodes Relu --inputs ${WORK_DIR}/x.npy --outdir ${WORK_DIR}/out_host --iterations 1)
same_output(out_host out "tilebsp run --excluded-nodes Relu: the outputs differ from the tiles' alone")
tool(1 "node 'Conv_0' \\(Conv, opset 17\\): the node is excluded to run on the host \\(excluded_nodes\\), but the host runs only the operators the importer folds .*not Conv" run ${MODEL} --batch-size 2 --excluded-nodes Conv)
