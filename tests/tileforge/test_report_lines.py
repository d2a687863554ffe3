"""The client's summary of finished compile jobs (tileforge.commands `_report`)."""

from tileforge.commands import _report
from tileforge.job import Job


def _job(**data) -> Job:
    return Job(None, {"id": "j1", "target": "cpu", "status": "succeeded", "artifact_id": "a1", **data})  # type: ignore[arg-type]


def test_a_passing_job_whose_outputs_vanished_is_reported_with_its_warning(capsys) -> None:
    warning = "onnxruntime's y holds no normal number (all zero, subnormal or not finite) on the random inputs"
    assert _report([_job(validated=True, validation_warning=warning)], None) == 0
    out, err = capsys.readouterr()
    assert "j1 (cpu) succeeded: artifact a1" in out and f"j1 (cpu) warning: {warning}" in err
    _report([_job(validated=True, validation_warning=None)], None)
    assert "warning" not in capsys.readouterr().err
    _report([_job(validated=False, validation_note="not validated on this ISA")], None)
    err = capsys.readouterr().err
    assert "NOT VALIDATED: not validated on this ISA" in err and "warning" not in err
