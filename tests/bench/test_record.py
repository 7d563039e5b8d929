"""What a bench result records about the machine that produced it."""

from __future__ import annotations

import pytest

from bench.common.record import cpu_identity, machine_description
from bench.reports.markdown import provenance

pytestmark = pytest.mark.unit

CPUINFO = (
    "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 167\n"
    "model name\t: Intel(R) Xeon(R) Processor\nstepping\t: 1\ncpu MHz\t\t: 2599.998\n\n"
    "processor\t: 1\nvendor_id\t: GenuineIntel\ncpu family\t: 25\nmodel\t\t: 1\n"
)


def test_the_first_cpus_family_model_stepping_and_clock_are_read() -> None:
    assert cpu_identity(CPUINFO) == "family 6 model 167 stepping 1, 2600 MHz"


def test_no_cpu_fields_give_no_identity() -> None:
    assert cpu_identity("Hardware\t: BCM2835\n") == ""


def test_the_page_names_the_cpu_identity_so_two_hosts_of_one_name_differ() -> None:
    machine = machine_description()
    line = provenance(
        {"command": "python -m bench.x", "date": "d", "git_revision": "r", "machine": machine}
    )
    assert machine["cpu_id"] and f"{machine['cpu']} ({machine['cpu_id']})" in line


def test_an_older_record_without_the_identity_still_renders() -> None:
    machine = {**machine_description(), "cpu": "AMD EPYC"}
    del machine["cpu_id"]
    line = provenance({"command": "c", "date": "d", "git_revision": "r", "machine": machine})
    assert f"machine: AMD EPYC, {machine['logical_cpus']} logical CPUs" in line
