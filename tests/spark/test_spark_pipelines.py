"""examples/pipelines/: the declarative pipeline, run by ``spark-pipelines`` against a server.

The project is copied to a temporary directory (its spec's ``storage``
pointed there too) and run there twice, as a user runs it
(``spark-pipelines run --spec ...`` from the project, ``NATS_URL`` in the
environment); its tables are read back from the project's
``spark-warehouse`` with pyarrow. The second run, after more orders and more
changes to the bucket, shows the materialized views recomputed and the
change feed resumed from the pipeline's checkpoint: each revision appended
once.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.examples import EXAMPLES
from tests.fixtures.spark import REPO_ROOT

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(1200)]

SPARK_PIPELINES = Path(sys.executable).parent / "spark-pipelines"
#: A catalog that outlives the run (a Derby metastore in the project), as the README's command.
HIVE = ("--conf", "spark.sql.catalogImplementation=hive")
#: How ``spark-pipelines`` of pyspark 4.3.0 ends a completed run that used a Python data source.
KNOWN_EXIT_ERROR = "[UNKNOWN_RESPONSE] Unknown response: Plan observed(__python_accumulator__="


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A copy of examples/pipelines/ whose storage (checkpoints) is in ``tmp_path`` too."""
    pytest.importorskip("pyspark.pipelines")
    if not SPARK_PIPELINES.exists():
        pytest.skip("pyspark's spark-pipelines command is not installed")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("spark-pipelines needs Java 17 or newer")
    copy = Path(shutil.copytree(EXAMPLES / "pipelines", tmp_path / "pipelines"))
    spec = copy / "spark-pipeline.yml"
    storage = f"storage: {(tmp_path / 'storage').as_uri()}"
    spec.write_text(re.sub(r"(?m)^storage: .*$", storage, spec.read_text()))
    return copy


def _run(project: Path, url: str) -> None:
    """``spark-pipelines run`` in ``project``, with this checkout's package importable."""
    paths = [str(REPO_ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    env = {
        **os.environ,
        "NATS_URL": url,
        "PYTHONPATH": os.pathsep.join(paths),
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PATH": os.pathsep.join([str(SPARK_PIPELINES.parent), os.environ.get("PATH", "")]),
    }
    done = subprocess.run(
        [str(SPARK_PIPELINES), *HIVE, "run", "--spec", str(project / "spark-pipeline.yml")],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    text = done.stdout + done.stderr
    output = f"{done.stdout[-6000:]}\n{done.stderr[-3000:]}"
    assert "Run is COMPLETED." in text, output
    if done.returncode != 0:
        # pyspark 4.3.0 (SPARK-59135): Python Data Source workers report empty profiler
        # accumulators, which reach the pipeline's command stream after the run completed as
        # observed metrics the CLI does not expect; it then exits 1 with this error alone.
        assert KNOWN_EXIT_ERROR in text, output


def _table(project: Path, name: str) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq

    return pq.read_table(project / "spark-warehouse" / name).to_pylist()


def _publish_orders(js, amounts: dict[str, list[int]]) -> None:
    for region, values in amounts.items():
        for value in values:
            js.publish(f"orders.{region}", b"%d" % value)


def test_the_pipeline_materializes_orders_and_the_buckets_changes(project, nats_server):
    """Run 1: revenue per region and the bucket's current customers. Run 2, after more orders
    and puts, a delete and a purge: the views follow, and the change feed appended only the
    new revisions."""
    import jetstream_sync

    with jetstream_sync.connect(nats_server.url) as nc:
        js = nc.jetstream()
        js.create_stream(name="ORDERS", subjects=["orders.>"], allow_direct=True)
        kv = js.create_key_value(bucket="customers", history=5)
        _publish_orders(js, {"eu": [10, 20, 30], "us": [5]})
        kv.put("c1", b"alice")
        kv.put("c2", b"bob")
        kv.put("c3", b"carol")
        kv.put("c1", b"alice v2")
        kv.delete("c2")
        _run(project, nats_server.url)

        revenue = {
            r["region"]: (r["orders"], r["revenue"]) for r in _table(project, "revenue_by_region")
        }
        assert revenue == {"eu": (3, 60), "us": (1, 5)}
        customers = {r["key"]: (r["value"], r["revision"]) for r in _table(project, "customers")}
        assert customers == {"c1": ("alice v2", 4), "c3": ("carol", 3)}

        _publish_orders(js, {"us": [7], "apac": [1, 2]})
        kv.purge("c3")
        kv.put("c4", b"dave")
        kv.put("c2", b"bob again")
        _run(project, nats_server.url)

    revenue = {
        r["region"]: (r["orders"], r["revenue"]) for r in _table(project, "revenue_by_region")
    }
    assert revenue == {"eu": (3, 60), "us": (2, 12), "apac": (2, 3)}
    customers = {r["key"]: (r["value"], r["revision"]) for r in _table(project, "customers")}
    assert customers == {"c1": ("alice v2", 4), "c4": ("dave", 7), "c2": ("bob again", 8)}
    changes = sorted(
        (r["revision"], r["key"], r["operation"]) for r in _table(project, "customer_changes")
    )
    assert changes == [
        (1, "c1", "PUT"),
        (2, "c2", "PUT"),
        (3, "c3", "PUT"),
        (4, "c1", "PUT"),
        (5, "c2", "DEL"),
        (6, "c3", "PURGE"),
        (7, "c4", "PUT"),
        (8, "c2", "PUT"),
    ]
