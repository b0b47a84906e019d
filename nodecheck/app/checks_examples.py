"""Per registered check: an example message for each status its judge gives, and the recorded
outputs its parsers are tested on. `nodecheck explain`, `nodecheck checks --format json` and
docs/checks.md show them (nodecheck/app/checks_reference.py).

The messages are real: each was yielded by the check's own judge when the tests ran it on recorded
and derived outputs (tests/checks, tests/judging), collected by wrapping every registered judge, and
picked here by hand; the few written by hand (cuda.version FAIL, roce.gid_stability, whose flap the
unit tests do not run) follow the code's f-strings word for word with sample values. When a judge's
wording changes, update its line here: tests/app/test_explain.py asserts every check has at least a
PASS and a non-PASS example, not that the wording is current.

The statuses any check can get from the runner rather than its judge (UNREACHABLE, TIMEOUT, a probe
that could not run or exited badly, SKIPPED at the deadline) are RUNNER_EXAMPLES, said once for all.
"""

from __future__ import annotations

from nodecheck.core.model import Status

# the messages nodecheck/run/runner.py (_blocked, _bad_exit) writes for any check, with the details
# the transports give (transport/fanout.py, local.py, ssh.py)
RUNNER_EXAMPLES: tuple[tuple[Status, str], ...] = (
    (Status.SKIPPED, "ibstat not run: not started: the run deadline was reached"),
    (Status.ERROR, "ibstat not found on the node (exit 127)"),
    (Status.TIMEOUT, "ibstat timed out: no answer within 10 s; killed"),
    (Status.UNREACHABLE, "unreachable: connect timeout after 10 s to node7:22"),
)

# (status, message) per check, most healthy first
EXAMPLES: dict[str, tuple[tuple[Status, str], ...]] = {
    "command": (
        (Status.PASS, "df -P /home: exit 0, output matches '\\\\s/home$', output does not match 'tmpfs'"),
        (Status.WARN, "df -P /home: available 1.71794e+08 KiB, expected >= 2e+08 KiB"),
        (Status.ERROR, "cat /x: no value in the output (regex '(\\\\d+) MB' did not match)"),
        (Status.FAIL, "mountpoint /home: exit 1, expected 0: 'mountpoint: /home: not a mountpoint'"),
    ),
    "container.digest": (
        (
            Status.PASS,
            "image sha256:2082abcb0e0a78964ad616b21c3b2af7c905dc33ce9d1316f0c7bddef787148e (majority: 2 of 3 nodes)",
        ),
        (Status.ERROR, "cannot read sha256sum output: /shared/images/pytorch-24.10.sqsh: Permission denied"),
        (
            Status.FAIL,
            "image sha256:5f1e2d3c4b5a69788796a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4 on node3, expected "
            "sha256:2082abcb0e0a78964ad616b21c3b2af7c905dc33ce9d1316f0c7bddef787148e (2 nodes)",
        ),
    ),
    "cpu": (
        (Status.PASS, "224 CPUs online, none offline (no expected count) (lscpu)"),
        (
            Status.WARN,
            "no cpufreq scaling_governor in sysfs (frequency set by firmware, or a VM): governor not judged, "
            "expected performance",
        ),
        (Status.ERROR, "Socket(s) not known (lscpu prints Socket(s): -), expected 1"),
        (Status.FAIL, "223 CPUs online, expected 224; offline: 112 (lscpu)"),
    ),
    "cuda.version": (
        (Status.PASS, "CUDA driver API 12.4 (pinned; 2 nodes)"),
        (Status.ERROR, "cannot read gpu probe output: nvidia-smi did not report the CUDA driver version"),
        (Status.FAIL, "CUDA driver API 12.2 on node2, expected 12.4 (2 nodes)"),
    ),
    "fs.free": (
        (Status.PASS, "/tmp free 77.93 GiB (>= 1 GiB); 76.8% free, 251.97 GiB ext4"),
        (Status.WARN, "/ritom/scratch free 98.5 %, expected >= 99 %; 9362520.8 GiB available, 9495785 GiB nfs"),
        (Status.ERROR, "/secret: statfs failed: Permission denied"),
        (Status.FAIL, "/dev/shm free 0 GiB, expected >= 1 GiB; 2.3% free, 0.25 GiB tmpfs"),
    ),
    "fs.mounts": (
        (Status.PASS, "/datasets: lustre rw from 10.10.0.1@o2ib:10.10.0.2@o2ib:/lfs01, statfs answered in 0.03 s"),
        (
            Status.WARN,
            "no mounts judged: /etc/fstab mounts nothing at boot and the playbook lists none (list the mounts "
            "jobs need under mounts:)",
        ),
        (Status.ERROR, "fs.mounts probe: cannot write a temporary file in any of /tmp /dev/shm /run /var/tmp"),
        (
            Status.FAIL,
            "/lustre/scratch (lustre rw from 10.10.0.1@o2ib:10.10.0.2@o2ib:/lfs01): statfs did not answer within "
            "2 s; stat of /lustre/scratch stuck in the kernel (D state), pid 31337 left behind: it cannot be "
            "killed until the server answers",
        ),
    ),
    "gpu.count": (
        (Status.PASS, "8 GPUs (NVML)"),
        (Status.FAIL, "GPU3: NVIDIA H100 PCIe, expected NVIDIA H100 80GB HBM3"),
    ),
    "gpu.dcgm_diag": (
        (Status.PASS, "DCGM level 2 passed on GPU 0 (DCGM 4.5.2, driver 580.82.09): software, memory, pcie"),
        (Status.WARN, "GPU 0: DCGM pcie test Warn: GPU 0 is running at PCI link width 8X (DCGM error 46)"),
        (Status.SKIPPED, "disruptive (DCGM level 2 loads the GPUs for ~2 min): not run without --allow-disruptive"),
        (
            Status.ERROR,
            "dcgmi not found in PATH: install DCGM: the datacenter-gpu-manager package (DCGM 4: "
            "datacenter-gpu-manager-4-cuda<N>) from NVIDIA's CUDA repository, then `systemctl enable --now "
            "nvidia-dcgm`",
        ),
        (
            Status.FAIL,
            "GPU 0: DCGM memory test Fail: A memory mismatch was detected on GPU 0, but no error was reported by "
            "CUDA or NVML. (DCGM error 58)",
        ),
    ),
    "gpu.driver": (
        (Status.PASS, "NVIDIA driver 550.90.07 (majority: 2 of 3 nodes)"),
        (Status.FAIL, "NVIDIA driver 535.104.05 on node3, expected 550.90.07 (2 nodes)"),
    ),
    "gpu.gsp_firmware": (
        (Status.PASS, "GPU GSP firmware 550.90.07 (all 2 nodes agree)"),
        (Status.ERROR, "cannot read gpu probe output: NVML did not report the GSP firmware version of GPU5"),
        (
            Status.FAIL,
            "GPU GSP firmware no GSP firmware in use (GPU3) + 550.90.07 (GPU0, GPU1, GPU2, GPU4, GPU5, GPU6, "
            "GPU7) on node1, expected 550.90.07 (pinned; 1 node)",
        ),
    ),
    "gpu.health": (
        (
            Status.PASS,
            "GPU6: ECC 0; ECC on; no remap pending; no throttling; persistence on; PCIe gen4 x16 (max gen5; "
            "idle: gen not judged); 18 NVLinks active",
        ),
        (Status.WARN, "GPU4: persistence mode off, expected on"),
        (
            Status.ERROR,
            "GPU7: volatile ECC error count, clock-event reasons not reported by NVML; the playbook requires "
            "them to judge the GPU",
        ),
        (Status.FAIL, "GPU1: volatile uncorrectable ECC 2 errors, expected <= 0 errors"),
    ),
    "gpu.perf": (
        (
            Status.PASS,
            "2 GPUs: gemm_bf16 642.4-730 TFLOPS, hbm 2200-2500 GB/s, h2d 55 GB/s, d2h 55 GB/s, nvlink 395 GB/s",
        ),
        (Status.WARN, "GPU1: gemm_bf16 584 TFLOPS, expected >= 620 TFLOPS"),
        (
            Status.SKIPPED,
            "GPU benchmark not started: 100 s left before the run's deadline, it may take 311 s (raise "
            "--deadline or shorten duration_s)",
        ),
        (Status.ERROR, "GPU benchmark failed (exit 1): RuntimeError: CUDA error: out of memory"),
        (
            Status.TIMEOUT,
            "GPU benchmark did not finish within its bound on the node's python3 (killed, exit 124); not judged",
        ),
        (Status.UNREACHABLE, "GPU benchmark did not complete (unreachable: connect timeout); not judged"),
        (Status.FAIL, "GPU0: hbm 1500 GB/s, expected >= 1750 GB/s"),
    ),
    "gpu.processes": (
        (Status.PASS, "GPU1: no compute process, 0 MiB used"),
        (Status.ERROR, "GPU0: compute processes not reported by NVML"),
        (Status.FAIL, "GPU5: leftover process pid 48213 python3 using 40960 MiB, expected none"),
    ),
    "gpu.sdc": (
        (Status.PASS, "GPU1: checksum aaaaaaaaaaaaaaaa agrees with 10 peer GPU(s)"),
        (
            Status.WARN,
            "GPU0: transient mismatch: checksum bbbbbbbbbbbbbbbb differs from its 11 peers' aaaaaaaaaaaaaaaa "
            "(NVIDIA H100 80GB HBM3 80 GiB cc 9.0 | torch 2.5.1 | ? | 12.4 | 550.90.07 | fp32 4096x4096 x16 seed "
            "20261202); the re-run computed aaaaaaaaaaaaaaaa, as expected (watch this GPU: a repeat is a fault)",
        ),
        (Status.SKIPPED, "SDC screen not run: busy — GPU processes are running: 99 python"),
        (Status.ERROR, "GPU1: SDC screen not computed: CUDA error: an illegal memory access was encountered"),
        (
            Status.FAIL,
            "GPU3: silent data corruption suspect: checksum bbbbbbbbbbbbbbbb differs from its 31 peers' "
            "aaaaaaaaaaaaaaaa (NVIDIA H100 80GB HBM3 80 GiB cc 9.0 | torch 2.5.1 | ? | 12.4 | 550.90.07 | fp32 "
            "4096x4096 x16 seed 20261202); persistent: the re-run computed bbbbbbbbbbbbbbbb",
        ),
    ),
    "gpu.vbios": (
        (Status.PASS, "GPU VBIOS 96.00.99.00.01 (majority: 2 of 3 nodes)"),
        (
            Status.FAIL,
            "GPU VBIOS 96.00.74.00.01 (GPU7) + 96.00.99.00.01 (GPU0, GPU1, GPU2, GPU3, GPU4, GPU5, GPU6) on "
            "node3, expected 96.00.99.00.01 (2 nodes)",
        ),
    ),
    "gpu.xid": (
        (Status.PASS, "no Xid events in the last 24h (dmesg, 43 lines)"),
        (
            Status.WARN,
            "Xid 43 on PCI:0000:38:00: GPU stopped processing: channel reset after an application fault (1x, "
            "last 2025-01-21 04:41:44Z, pid 2924364 pt_main_thread)",
        ),
        (
            Status.ERROR,
            "unreadable Xid line: Xid line ends before its message (cut short?): 'NVRM: Xid (PCI:0000:9b:00): 11'",
        ),
        (
            Status.FAIL,
            "Xid 79 on PCI:0000:b3:00: GPU has fallen off the bus (from the kernel's message; no Xid line) (1x, "
            "last 2025-02-23 15:38:23Z)",
        ),
    ),
    "hca.firmware": (
        (Status.PASS, "HCA firmware MT4125 22.38.1002, MT4129 28.39.1002 (majority: 2 of 3 nodes)"),
        (
            Status.FAIL,
            "HCA firmware MT4125 22.38.1002, MT4129 28.37.1014 on node2, expected MT4125 22.38.1002, MT4129 "
            "28.39.1002 (2 nodes)",
        ),
    ),
    "ib.counters": (
        (Status.PASS, "mlx5_0/1: no error counter rose in 30.5 s (perfquery -x)"),
        (
            Status.WARN,
            "mlx5_0/1: LinkDownedCounter saturated at 255: increase unknown; clear with perfquery -R (basic) / "
            "perfquery -x -R (extended), then re-run",
        ),
        (
            Status.ERROR,
            "mlx5_0/1: cannot read counters: x: perfquery could not open the port (no ib_umad? load the ib_umad "
            "kernel module); sysfs: port 1 not in the output",
        ),
        (Status.FAIL, "mlx5_0/1: SymbolErrorCounter +42 in 3600 s = 42/h, expected <= 40/h"),
    ),
    "ib.pairs": (
        (Status.PASS, "4 tests with 2 partners pass; slowest 111.71 Gb/s (mlx5_0 with node8)"),
        (
            Status.WARN,
            "node2 mlx5_0: best bw 104 Gb/s, 6.9% below its peers' median 111.7 Gb/s (MAD 0 Gb/s, 7 peers, "
            "mlx5_0 at 400 Gb/s)",
        ),
        (
            Status.SKIPPED,
            "partly tested: 2 tests with 1 partner pass; slowest 111.71 Gb/s (mlx5_0 with node2); not tested "
            "with node3: round 3 not run: 100 s left before the deadline, it needs 120 s",
        ),
        (Status.ERROR, "no partner: pair tests need at least 2 reachable nodes with a port to test, found 1"),
        (
            Status.FAIL,
            "bad node: fails with 2/2 partners, which pass with others: node4: mlx5_0 both ways at 0.93 Gb/s; "
            "node6: mlx5_0 both ways at 0.93 Gb/s (expected >= 100 Gb/s)",
        ),
    ),
    "ib.ports": (
        (Status.PASS, "mlx5_0/1: Active/LinkUp, 400 Gb/s"),
        (Status.ERROR, "mlx5_9: not present, expected in devices list"),
        (Status.FAIL, "mlx5_3/1: Down/Polling, expected Active/LinkUp"),
    ),
    "kernel.cmdline": (
        (Status.PASS, "kernel command line ro quiet splash vt.handoff=7 (all 3 nodes agree)"),
        (
            Status.FAIL,
            "kernel command line ro splash vt.handoff=7 on node2, expected ro quiet splash vt.handoff=7 (2 nodes)",
        ),
    ),
    "kernel.modules": (
        (Status.PASS, "nvidia loaded"),
        (
            Status.WARN,
            "gdrdrv not loaded (/proc/modules), expected loaded: GDRCopy is unavailable (NCCL and UCX fall back "
            "to slower copies)",
        ),
        (
            Status.FAIL,
            "nvidia_peermem or nv_peer_mem not loaded (lsmod), expected loaded: GPUDirect RDMA is off: NCCL "
            "stages through host memory, inter-node bandwidth drops",
        ),
    ),
    "kernel.params": (
        (Status.PASS, "iommu=pt on the kernel command line"),
        (
            Status.ERROR,
            "net.ipv4.tcp_wmem = '4096 16384 4194304': not one number, so the band cannot judge it; give the "
            "value as text",
        ),
        (Status.FAIL, "kernel command line has iommu=nopt, expected iommu=pt"),
    ),
    "kernel.version": (
        (Status.PASS, "kernel 5.15.0-112-generic (majority: 2 of 3 nodes)"),
        (Status.WARN, "kernel 5.15.0-113-generic on node2, expected 5.15.0-112-generic (2 nodes)"),
        (
            Status.ERROR,
            "kernel: no majority among 5.15.0-112-generic on node1, 5.15.0-113-generic on node2; pin the right "
            "one with expect: in the playbook",
        ),
        (Status.FAIL, "kernel 5.15.0-112-generic on node[1,3], expected 5.15.0-113-generic (pinned; 1 node)"),
    ),
    "limits": (
        (
            Status.PASS,
            "stack unlimited (slurmd's limits) (>= 8 MiB); PropagateResourceLimits=ALL, "
            "PropagateResourceLimitsExcept=MEMLOCK: a job gets its submitting shell's soft limit, up to this "
            "hard limit",
        ),
        (
            Status.WARN,
            "memlock 8 MiB (slurmd's limits) (>= 1 MiB), but PropagateResourceLimits=ALL gives a job its "
            "submitting shell's soft memlock limit (login nodes often have 64 KiB), which this node cannot see: "
            "set PropagateResourceLimitsExcept=MEMLOCK in slurm.conf so jobs get slurmd's",
        ),
        (
            Status.FAIL,
            "memlock 64 KiB (slurmd's limits), expected unlimited (RDMA memory registration fails); "
            "PropagateResourceLimits not known (no slurm.conf readable on the node): the soft limit judged",
        ),
    ),
    "mem": (
        (Status.PASS, "MemAvailable 97.4 % (>= 10 %) (1962.5 of 2015.5 GiB)"),
        (
            Status.WARN,
            "CPU_SrcID#0_MC#2_Chan#0_DIMM#1 (mc2/dimm1): 40 corrected ECC errors in 72.0 h = 13.33 per day, "
            "expected <= 10 per day",
        ),
        (
            Status.SKIPPED,
            "EDAC not loaded (no /sys/devices/system/edac/mc): ECC errors not checked (ecc: off where this "
            "platform has no EDAC driver)",
        ),
        (Status.ERROR, "EDAC lists no dimmN directories (ranks or csrows only): DIMMs not counted"),
        (
            Status.FAIL,
            "1 uncorrectable memory error(s) on DIMM CPU_SrcID#1_MC#1_Chan#1_DIMM#0 (mc5/dimm2) of mc5 "
            "(Intel_10nm Socket#1 IMC#1), expected 0",
        ),
    ),
    "nccl.allreduce_multi": (
        (
            Status.PASS,
            "all_reduce across 2 nodes (node[1-2]), 16 ranks: busbw 298.82 GB/s (>= 250 GB/s) at >= 1 GiB "
            "(slowest of 4 sizes), avg busbw 70.742 GB/s, 16 ranks",
        ),
        (
            Status.WARN,
            "all_reduce: the 8-node test failed (blamed: node5); this node's 2-node tests pass, slow with node2: "
            "busbw 298.82 GB/s; node8: busbw 298.82 GB/s (warn below 300 GB/s)",
        ),
        (Status.SKIPPED, "all_reduce: not run: 355 s left before the deadline, the test may take 361 s"),
        (
            Status.ERROR,
            "all_reduce: not judged: the 4-node test failed and failed only with bad node(s) node2; not yet "
            "tested with a good partner",
        ),
        (
            Status.FAIL,
            "all_reduce: 16 ranks in the output, expected 64 (8 nodes); every 2-node test passes: a problem that "
            "shows only at this scale (topology, a switch, NCCL settings), not one node",
        ),
    ),
    "nccl.allreduce_single": (
        (
            Status.PASS,
            "all_reduce: busbw 298.82 GB/s (>= 200 GB/s) at >= 1 GiB (slowest of 4 sizes), avg busbw 70.742 "
            "GB/s, 16 ranks",
        ),
        (Status.FAIL, "all_reduce: 16 ranks in the output, expected 8"),
    ),
    "nccl.env": (
        (
            Status.PASS,
            "reaches node1:29500 (master: MASTER_ADDR=node1 (job environment); MASTER_PORT=29500 (job "
            "environment)); node1:29600 (ring successor)",
        ),
        (
            Status.WARN,
            "flight recorder off (TORCH_FR_BUFFER_SIZE unset, TORCH_NCCL_DUMP_ON_TIMEOUT unset): a timed-out "
            "collective leaves no record of which rank stopped where; set TORCH_NCCL_TRACE_BUFFER_SIZE=2000 and "
            "TORCH_NCCL_DUMP_ON_TIMEOUT=1",
        ),
        (
            Status.SKIPPED,
            "reachability not tested: no port to test (MASTER_ADDR and MASTER_PORT unset, reachability.ports empty)",
        ),
        (Status.ERROR, "cannot test reachability: no python3 on node3"),
        (
            Status.FAIL,
            "node2 cannot reach node3:29600 (ring successor): no answer within 3 s — a firewall dropping packets "
            "or no route",
        ),
    ),
    "nccl.settings": (
        (Status.PASS, "NCCL settings NCCL_IB_GID_INDEX=3; NCCL_IB_HCA=mlx5; net plugin none (majority: 2 of 3 nodes)"),
        (
            Status.WARN,
            "NCCL settings: no majority among NCCL_IB_GID_INDEX=3; NCCL_IB_HCA=mlx5; net plugin none on node1, "
            "NCCL_IB_GID_INDEX=0; NCCL_IB_HCA=mlx5; net plugin none on node2, NCCL_IB_GID_INDEX=3; "
            "NCCL_IB_HCA=mlx5; net plugin libnccl-net.so on node3; pin the right one with expect: in the playbook",
        ),
        (Status.ERROR, "cannot read nccl.conf output: not a NAME=value line: 'NCCL_DEBUG = INFO'"),
        (
            Status.FAIL,
            "NCCL settings NCCL_IB_GID_INDEX=0; NCCL_IB_HCA=mlx5; net plugin none on node2, expected "
            "NCCL_IB_GID_INDEX=3; NCCL_IB_HCA=mlx5; net plugin none (2 nodes)",
        ),
    ),
    "nccl.version": (
        (Status.PASS, "NCCL 2.29.2 (majority: 2 of 3 nodes)"),
        (
            Status.ERROR,
            "cannot read ldconfig -p output: libnccl.so.2 is in the loader cache "
            "(/usr/local/lib/python3.10/dist-packages/nvidia/nccl/lib/libnccl.so.2) but its file name carries no "
            "version",
        ),
        (
            Status.FAIL,
            "no libnccl.so.2 in the loader cache (ldconfig -p) (nccl.h says 2.23.4): a job using the host's NCCL "
            "would fail to load it",
        ),
    ),
    "node.oom": (
        (Status.PASS, "no OOM kills in the last 24h (dmesg, 17 lines)"),
        (Status.WARN, "OOM killed python3 2x since boot (last 2025-05-15 23:09:30Z, pid 15783, global), expected none"),
        (
            Status.ERROR,
            "unreadable OOM kill line: OOM kill line not in a known form: 'Out of memory: Killed process 1235 "
            "(python3)'",
        ),
        (Status.FAIL, "OOM killed java 1x since boot (last 2017-12-07 00:05:15Z, pid 28438, cgroup), expected none"),
    ),
    "nvidia.libraries": (
        (Status.PASS, "libnvidia-ml.so.1 -> libnvidia-ml.so.550.90.07 (550.90.07, 2078360 bytes)"),
        (
            Status.WARN,
            "libcuda.so.1 not in the loader's cache (ldconfig -p) but at /usr/lib/x86_64-linux-gnu/libcuda.so.1: "
            "the loader finds it only if that is one of its default directories; run ldconfig",
        ),
        (
            Status.ERROR,
            "libcuda.so.1 -> /home/alice/libcuda.so.550.90.07: not followed (link target outside the library "
            "directories), so its file cannot be judged",
        ),
        (
            Status.FAIL,
            "libnvidia-ml.so.1 -> libnvidia-ml.so.550.90.07 is empty (0 bytes): a failed driver upgrade "
            "(Soperator #2684): NVML: nvidia-smi, DCGM and NCCL's topology detection fail",
        ),
    ),
    "nvlink.domain": (
        (
            Status.PASS,
            "in the majority NVLink domain of nvl_domain=r7: ClusterUUID a1b2c3d4-0000-4000-8000-000000000001 "
            "CliqueId 1 (2 of 3 nodes)",
        ),
        (Status.ERROR, "no inventory label nvl_domain=<domain> on this node: its NVLink domain is unknown"),
        (
            Status.FAIL,
            "outside nvl_domain=r7's NVLink domain: ClusterUUID a1b2c3d4-0000-4000-8000-000000000001 CliqueId 2, "
            "expected ClusterUUID a1b2c3d4-0000-4000-8000-000000000001 CliqueId 1 (2 of 3 nodes; differs in "
            "CliqueId)",
        ),
    ),
    "nvlink.errors": (
        (Status.PASS, "GPU0: no NVLink error counter rose in 600.0 s on 4 links (NVML)"),
        (Status.WARN, "GPU0 link 0: crc_data +3 in 600 s = 0.005/s, expected <= 0/h (CRC data errors)"),
        (Status.ERROR, "the GPU probe did not report when it read (clock/uptime): the counters' window is unknown"),
        (Status.FAIL, "GPU1 link 2: crc_flit +120000 in 600 s = 200/s, expected < 100/s (CRC flit errors)"),
    ),
    "nvlink.fabric": (
        (Status.PASS, "GPU0: fabric completed, status success"),
        (
            Status.ERROR,
            "cannot tell whether this node has NVSwitches: lspci not found (pciutils), and the nvidia-nvswitch "
            "driver lists none; nvidia-fabricmanager.service not judged (set fabric_manager: required or ignore)",
        ),
        (
            Status.FAIL,
            "GPU0: fabric state not_started (Fabric Manager has not registered it), expected completed with "
            "status success",
        ),
    ),
    "nvlink.sxid": (
        (Status.PASS, "no NVSwitch SXid events since boot (dmesg, 43 lines)"),
        (
            Status.WARN,
            "SXid 20009 (Non-fatal) on nvswitch0 PCI:0000:06:00.0, link 4: RX Short Error Rate (1x, last "
            "2025-01-30 16:35:09Z)",
        ),
        (
            Status.ERROR,
            "unreadable SXid line: SXid line ends before its link and message (cut short?): 'nvidia-nvswitch1: "
            "SXid (PCI:0000:06:00.0): 20009, Non-fatal,'… (63 characters)",
        ),
        (
            Status.FAIL,
            "SXid 24007 (Fatal) on nvswitch0 PCI:0000:c3:00.0, link 28: sourcetrack timeout error (First) (1x, "
            "last 2025-01-29 20:31:48Z): a fatal NVSwitch error: NVLink traffic through this switch has stopped; "
            "the GPUs behind it need a reset (reboot) and Fabric Manager a restart (NVIDIA Fabric Manager User "
            "Guide)",
        ),
    ),
    "ofed.version": (
        (Status.PASS, "OFED MLNX_OFED_LINUX-23.07-0.5.1.2 (majority: 2 of 3 nodes)"),
        (Status.FAIL, "OFED MLNX_OFED_LINUX-23.10-1.1.9.0 on node2, expected MLNX_OFED_LINUX-23.07-0.5.1.2 (2 nodes)"),
    ),
    "os.release": (
        (Status.PASS, "OS Ubuntu 22.04.4 LTS (majority: 2 of 3 nodes)"),
        (Status.ERROR, "cannot read /etc/os-release output: exited 1: cat: /etc/os-release: No such file or directory"),
        (Status.FAIL, "OS Ubuntu 22.04.5 LTS on node2, expected Ubuntu 22.04.4 LTS (2 nodes)"),
    ),
    "pcie.acs": (
        (Status.PASS, "ACS disabled on the 2 bridge(s) above 2 GPU(s)"),
        (
            Status.WARN,
            "0000:00:01.0 (Intel Corporation Mobile 4 Series Chipset PCI Express Graphics Port [8…) above GPU "
            "0000:01:00.0: no ACS capability, expected ACS enabled (devices below are not isolated)",
        ),
        (
            Status.ERROR,
            "lspci could not read the capabilities of 2 bridge(s) above the GPU/HCAs ('Capabilities: <access "
            "denied>'): run nodecheck as root",
        ),
        (
            Status.FAIL,
            "0000:80:02.0 (Intel Corporation Xeon E7 v4/Xeon E5 v4/Xeon E3 v4/Xeon D PCI Express …) above GPU "
            "0000:82:00.0: ACSCtl SrcValid- ReqRedir- CmpltRedir-, expected ACS enabled",
        ),
    ),
    "pcie.aer": (
        (Status.PASS, "no AER errors on 2 device(s) (GPUs/HCAs and the bridges above them)"),
        (Status.WARN, "GPU 0000:04:00.0: 9 correctable AER errors in 0.5 h since boot (18.0/h), expected <= 10/h"),
        (Status.SKIPPED, "no AER counters on any of 2 device(s) (no aer_dev_* files: kernel < 4.17 or AER off)"),
        (Status.ERROR, "no GPU or HCA in /sys/bus/pci/devices: no AER counters to judge"),
        (
            Status.FAIL,
            "bridge 0000:00:02.0 above GPU 0000:04:00.0: 28 fatal AER error(s) since boot (Undefined 10, DLP 11, "
            "SDES 12, TLP 13, FCP 14, CmpltTO 15, CmpltAbrt 16, UnxCmplt 17, RxOF 18, MalfTLP 19, ECRC 20, "
            "UnsupReq 21, ACSViol 22, UncorrIntErr 23, BlockedTLP 24, AtomicOpBlocked 25, TLPBlockedErr 26, "
            "PoisonTLPBlocked 27), expected 0",
        ),
    ),
    "proc.health": (
        (Status.PASS, "no process stuck in D state"),
        (
            Status.WARN,
            "1 zombies older than 60 s, expected <= 0: python (pid 10, alice, running 10m 0s); parents 1 (a "
            "parent that does not reap its children)",
        ),
        (Status.ERROR, "cannot read the online CPU count (getconf _NPROCESSORS_ONLN): load not judged"),
        (Status.TIMEOUT, "ps did not finish within 5 s (reading /proc hangs: a process stuck in the kernel?)"),
        (
            Status.FAIL,
            "3 zombies older than 60 s, expected <= 2: defunct (pid 100, root, running 15m 0s), defunct (pid "
            "101, root, running 15m 0s), defunct (pid 102, root, running 15m 0s); parents 7 (a parent that does "
            "not reap its children)",
        ),
    ),
    "roce.gid_stability": (
        (
            Status.PASS,
            "mlx5_0/1 (rnic3): RoCE v2 IPv4 GID stable across the flap (10.77.0.3 at 3); port ACTIVE, address "
            "back after 2.1 s",
        ),
        (
            Status.SKIPPED,
            "mlx5_0/1 (rnic3): not flapped: 100 s left before the run's deadline, the flap may take 120 s",
        ),
        (Status.ERROR, "no RoCE port with a RoCE v2 IPv4 GID to flap"),
        (
            Status.FAIL,
            "mlx5_0/1 (rnic3): RoCE v2 IPv4 GID changed across a port flap: 10.77.0.3 moved from index 3 to 5; "
            "running jobs pinned to the old index lose their peers (is NetworkManager managing it? see "
            "roce.networkmanager)",
        ),
    ),
    "roce.gids": (
        (Status.PASS, "mlx5_0/1 (rnic3): RoCE v2 IPv4 GID 10.77.0.3 at index 3 (the playbook)"),
        (
            Status.WARN,
            "mlx5_0/1: RoCE v2 IPv4 GID at index 5 on node4, at 3 on 3 nodes: a job pinned to one index breaks "
            "on the others",
        ),
        (Status.ERROR, "no RoCE (Ethernet) RDMA port"),
        (
            Status.FAIL,
            "mlx5_0/1 (rnic3): no RoCE v2 IPv4 GID (entries: 0: fe80:0000:0000:0000:4c6f:a3ff:fe12:3401 v1, 1: "
            "fe80:0000:0000:0000:4c6f:a3ff:fe12:3401 v2); the port has no IPv4 address or it was dropped",
        ),
    ),
    "roce.networkmanager": (
        (Status.PASS, "mlx5_0/1 (rnic3): unmanaged by NetworkManager"),
        (
            Status.WARN,
            "NetworkManager manages RDMA netdevs rnic3 (mlx5_0/1, connected): a link flap can drop their address "
            "and renumber the RoCE GID table; fix: add to /etc/NetworkManager/conf.d/99-rdma-unmanaged.conf: "
            "[keyfile] unmanaged-devices=interface-name:rnic3; then `nmcli general reload` (or restart "
            "NetworkManager)",
        ),
        (Status.ERROR, "no RoCE (Ethernet) RDMA port on this node: nothing to judge"),
    ),
    "services": (
        (Status.PASS, "docker.service not installed (optional)"),
        (
            Status.WARN,
            "slurmd.service active (running) since Mon 2025-01-06 10:00:00 UTC but restarted 1 times by systemd "
            "(NRestarts), expected <= 0: it crashed and came back, flapping",
        ),
        (
            Status.ERROR,
            "cannot tell whether munged runs on this node: 1 process(es) of that name whose mount namespace "
            "could not be read (pid 102; is nodecheck running as root?)",
        ),
        (Status.FAIL, "munge.service not installed (LoadState=not-found), expected active"),
    ),
    "time.skew": (
        (
            Status.PASS,
            "node2 clock 0.000 s ± 0.000 s ahead of the fleet median (which is 0.000 s ahead of the operator "
            "host), within 0.1 s",
        ),
        (
            Status.WARN,
            "node2 clock 0.300 s ± 0.000 s ahead of the operator host's clock (fewer than 3 nodes: no fleet "
            "median), expected within 0.1 s",
        ),
        (
            Status.SKIPPED,
            "not judged: nodecheck runs on the node itself (--local, the Prolog, health), so there is no other "
            "clock to compare it with; run time.skew from the operator host over SSH",
        ),
        (
            Status.ERROR,
            "`date +%s.%N` printed '1733000000.N', not seconds.nanoseconds (a date without %N, such as "
            "busybox's?): clock not read",
        ),
        (Status.TIMEOUT, "clock not read: date timeout: timed out after 10 s"),
        (
            Status.FAIL,
            "node3 clock 3.000 s ± 0.000 s ahead of the fleet median (which is 0.000 s ahead of the operator "
            "host), expected within 1 s",
        ),
    ),
    "time.sync": (
        (
            Status.PASS,
            "clock 0.00198352 s ahead of its reference (chronyd, reference 2D40B9B4 (s180.blued.co.th)), <= 0.01 s",
        ),
        (
            Status.WARN,
            "root distance 0.190659 s (root delay 0.0167451 s / 2 + root dispersion 0.182287 s; the clock's "
            "worst error through its reference), expected <= 0.1 s",
        ),
        (Status.ERROR, "cannot read chronyc tracking: no 'Leap status' line"),
        (
            Status.FAIL,
            "clock 7.81054 s behind its reference (chronyd, reference D9723B42 (ns0.luns.net.uk)), expected <= 0.1 s",
        ),
    ),
}

# the directories of tests/data/ holding the recorded outputs (provenance: tests/data/SOURCES.md)
# the check's parsers and judge are tested on; () where its tests build their input in code
CORPUS: dict[str, tuple[str, ...]] = {
    "command": (),
    "container.digest": ("container-digests",),
    "cpu": ("lscpu", "sysfs_cpu"),
    "cuda.version": ("nvidia-smi-q",),
    "fs.free": ("stat-f",),
    "fs.mounts": ("findmnt", "fstab", "mountinfo", "stat-f"),
    "gpu.count": ("nvidia-smi-query-csv",),
    "gpu.dcgm_diag": ("dcgmi-diag",),
    "gpu.driver": ("nvidia-smi-q",),
    "gpu.gsp_firmware": ("nvidia-smi-q",),
    "gpu.health": ("nvidia-smi-q", "nvidia-smi-nvlink"),
    "gpu.perf": ("gpu_bench", "nvbandwidth"),
    "gpu.processes": ("nvidia-smi-query-csv",),
    "gpu.sdc": ("gpu_bench",),
    "gpu.vbios": ("nvidia-smi-q",),
    "gpu.xid": ("dmesg-xid",),
    "hca.firmware": ("ibstat",),
    "ib.counters": ("perfquery", "sysfs_ib_counters"),
    "ib.pairs": ("ibstat", "perftest"),
    "ib.ports": ("ibstat",),
    "kernel.cmdline": ("proc-cmdline",),
    "kernel.modules": ("lsmod", "proc-modules"),
    "kernel.params": ("proc-cmdline",),
    "kernel.version": (),
    "limits": ("proc-limits",),
    "mem": ("meminfo", "sysfs_edac"),
    "nccl.allreduce_multi": ("nccl-tests", "nccl-debug-info"),
    "nccl.allreduce_single": ("nccl-tests", "nccl-debug-info"),
    "nccl.env": ("job", "ps"),
    "nccl.settings": (),
    "nccl.version": ("ldconfig-p",),
    "node.oom": ("dmesg-oom",),
    "nvidia.libraries": ("ldconfig-p", "ls-l-driver-libs", "proc-driver-nvidia-version", "sys-module-nvidia-version"),
    "nvlink.domain": ("nvidia-smi-q",),
    "nvlink.errors": ("nvidia-smi-nvlink",),
    "nvlink.fabric": ("nvidia-smi-q", "lspci-nvswitch"),
    "nvlink.sxid": ("dmesg-sxid",),
    "ofed.version": (),
    "os.release": (),
    "pcie.acs": ("lspci",),
    "pcie.aer": ("sysfs_aer",),
    "proc.health": ("ps",),
    "roce.gid_stability": (),
    "roce.gids": (),
    "roce.networkmanager": (),
    "services": ("systemctl-show",),
    "time.skew": (),
    "time.sync": ("chronyc-tracking", "ntpq", "timedatectl"),
}

# the node tools an active check's steps run between or on the nodes after the probes came back
# (its probes' own tools are read from their commands); from each check's module
ACTIVE_TOOLS: dict[str, tuple[str, ...]] = {
    "gpu.dcgm_diag": ("dcgmi",),
    "gpu.perf": ("python3", "nvbandwidth"),
    "gpu.sdc": ("python3",),
    "ib.pairs": ("ib_write_bw",),
    "nccl.allreduce_multi": ("mpirun", "srun", "all_reduce_perf"),
    "nccl.env": ("python3",),
    "nvlink.domain": (),
    "roce.gid_stability": ("ip", "date"),
    "time.skew": ("date",),
}
