"""What a shared Ray head saves each run: ``ray.init()`` starting a local cluster (what every
``devenus.train`` run does on its own: GCS, raylet, the CPU backend's settings) against ``ray.init``
attaching to a running head (what the experiment runner's runs do), in fresh processes, alternating.

    python experiments/bench_ray_startup.py --trials 3

Only the ``ray.init`` call is timed (the import of ray is paid either way); the first actor's start is
timed too, since a fresh cluster also has to spawn its first worker process.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import textwrap

PROBE = textwrap.dedent("""
    import json, sys, time
    import ray
    address = sys.argv[1]
    t0 = time.perf_counter()
    if address == "local":
        ray.init(num_cpus=16, num_gpus=1, include_dashboard=False)
    else:
        ray.init(address=address)
    t1 = time.perf_counter()

    @ray.remote(num_cpus=0)
    class A:
        def ping(self):
            return 1

    ray.get(A.remote().ping.remote())
    t2 = time.perf_counter()
    ray.shutdown()
    print(json.dumps({"init_s": t1 - t0, "first_actor_s": t2 - t1}))
""")


def probe(address: str, env: dict) -> dict:
    out = subprocess.run([sys.executable, "-c", PROBE, address], capture_output=True, text=True, env=env,
                         timeout=600, start_new_session=True)
    line = [x for x in out.stdout.splitlines() if x.startswith("{")]
    if not line:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(line[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=3)
    args = ap.parse_args()
    from devenus.adapters.verl.cpu.launch import cpu_launch_env
    from devenus.runs.ray_head import RayHead

    res: dict[str, list[dict]] = {"local": [], "shared": []}
    with RayHead(num_gpus=1, env=cpu_launch_env()) as head:
        env = head.env(cpu_launch_env())
        print(f"head up in {head.start_s:.1f} s at {head.address}", flush=True)
        for i in range(args.trials):
            for kind in ("local", "shared"):
                r = probe("local" if kind == "local" else head.address, env)
                res[kind].append(r)
                print(f"trial {i} {kind}: init {r['init_s']:.1f} s, first actor {r['first_actor_s']:.1f} s", flush=True)
    summary = {k: {m: round(statistics.median(r[m] for r in v), 2) for m in ("init_s", "first_actor_s")}
               for k, v in res.items()}
    saved = sum(summary["local"].values()) - sum(summary["shared"].values())
    print(json.dumps({"median": summary, "saved_per_run_s": round(saved, 2), "trials": args.trials}))


if __name__ == "__main__":
    main()
