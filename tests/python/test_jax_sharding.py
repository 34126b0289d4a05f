"""opcore ops on 2 CPU devices (XLA_FLAGS=--xla_force_host_platform_device_count=2,
in a child process: the flag must be set before JAX starts): per shard under
jax.shard_map with the varying-axes marker (a replicated out_spec is refused,
grad works), and under jit with a batch-sharded NamedSharding without
gathering the input (batch_dims), results equal to the unsharded run."""
import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("jax")
pytest.importorskip("opcore.jax")

CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "jax_sharding_child.py")


@pytest.fixture(scope="module")
def results():
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2")
    r = subprocess.run([sys.executable, CHILD], capture_output=True, text=True, timeout=600, env=env)
    line = next((l for l in r.stdout.splitlines() if l.startswith("RESULT ")), None)
    assert r.returncode == 0 and line, f"child failed (rc {r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    out = json.loads(line[len("RESULT "):])
    assert out["devices"] == 2
    return out


def _check(results, name):
    r = results[name]
    assert r["ok"], json.dumps(r, indent=1)
    return r


def test_shard_map_runs_per_shard(results):
    _check(results, "shard_map_per_shard")


def test_shard_map_result_varies_over_the_mesh_axis(results):
    _check(results, "shard_map_replicated_out_spec_refused")


def test_grad_inside_shard_map(results):
    _check(results, "shard_map_grad")


def test_jit_named_sharding_without_gather_auto_axes(results):
    r = _check(results, "jit_named_sharding_auto")
    assert not r["all_gather"] and r["local_batch"] and r["out_sharding"].startswith("P('d'")


def test_jit_named_sharding_without_gather_explicit_axes(results):
    r = _check(results, "jit_named_sharding_explicit")
    assert not r["all_gather"] and r["local_batch"]


def test_ops_without_batch_dims_gather(results):
    _check(results, "jit_without_batch_dims_gathers")


def test_sharded_grad_and_vmap(results):
    _check(results, "jit_sharded_grad_and_vmap")


def test_batch_dims_beyond_a_results_rank(results):
    _check(results, "batch_dims_on_a_scalar_result_is_an_error")


def test_export_of_a_sharded_function(results):
    _check(results, "export_sharded")


def test_several_batch_dims_shard_a_second_dim_without_gather(results):
    """batch_dims=(0, 1): NamedSharding on dim 1 runs per shard, no
    all-gather in the compiled HLO (auto and explicit mesh axes)."""
    _check(results, "jit_named_sharding_second_dim_auto")
    _check(results, "jit_named_sharding_second_dim_explicit")


def test_one_batch_dim_and_a_second_dim_sharding_gathers(results):
    _check(results, "jit_second_dim_with_one_batch_dim_gathers")
