"""Fake nccl-tests (all_reduce_perf, all_gather_perf, reduce_scatter_perf, alltoall_perf) and fake
launchers (Open MPI's mpirun, Slurm's srun) for the simulated cluster.

Installed on a node by SimCluster.nccl() / fake_nccl_tests() (tests/harness/sim/nccl.py): a copy of
this package in the node's data directory, __main__.py beside it as <data>/nccl_tests.py, and six
/bin/sh wrappers that run `python3 -I <data>/nccl_tests.py NODE NODE_ADDRESS NET STATE_JSON MODE "$0"
"$@"`, MODE being the tool's name, so no environment variable is needed. Nothing of CUDA or NCCL is simulated: the tests
print what nccl-tests prints for the bandwidths STATE_JSON ($S/nccl.json) gives, and the launchers
start real processes on the other nodes.

* A perf tool alone is one process driving -g GPUs of its node. Under a launcher (the launcher puts
  NODECHECK_FAKE_NCCL_COORD=addr:port in the ranks' environment, with OMPI_COMM_WORLD_* or SLURM_*)
  every process connects to the launcher's coordinator over TCP from its node's address, registers,
  and every step (device report, NCCL init, each size) is a real barrier through the coordinator;
  only world rank 0 prints, as nccl-tests does.
* mpirun / srun start ONE agent per host (like orted): `ssh -F $S/ssh_config HOST mpirun
  --nodecheck-fake-agent` (no ssh for the launcher's own node), which forks the host's ranks with
  their environment, relays their stdout/stderr and exit codes back as JSON lines, and kills them
  when its ssh session (stdin) or the coordinator goes away.

Output follows the nccl-tests sources (NVIDIA/nccl-tests src/common.cu, src/util.cu): the 2.17.x
layout (tests_version < 2.18, no "unalign" in the parameter line) or the newest one (2.19.1,
"unalign: N"), shaped on the corpus recordings nccl-tests/olivia-gh200-slingshot-2.17.9-... and
nccl-tests/rtx6000d-2node-2.18.2-... ; -J FILE.json writes the newest JSON report (util.cu,
JSON_FILE_VERSION 2). NCCL's own "NCCL version" line follows NCCL's init.cc (showVersion).
The bandwidth model, the faults and the state schema: tests/harness/README.md, "nccl-tests".

One module per program, over what they share:
    perf.py      all_reduce_perf, all_gather_perf, reduce_scatter_perf, alltoall_perf (one nccl-tests process)
    mpirun.py    Open MPI's mpirun
    srun.py      Slurm's srun
    launch.py    the launchers' coordinator, job (one agent per host) and the agent (orted / slurmstepd)
    state.py     nccl.json, the node a process runs on, writing output
    model.py     the bandwidth model: collectives, sweep sizes, the curve
    options.py   nccl-tests' options and usage; libc.py: getopt_long, strtol
    output.py    nccl-tests' text lines and -J JSON report
    main.py      the entry: MODE -> program (__main__.py runs it)
Modules import each other as `nccl_tests.<module>` (the node's python3 -I finds the package beside the
entry script), and use the standard library only (Python >= 3.9, as a node's own python3).
"""
