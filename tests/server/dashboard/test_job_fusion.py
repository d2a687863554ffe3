"""The job page's fusion table: report.json's "fusion" section, read through the service layer."""

from server.db.models import Artifact
from server.db.session import transaction

FUSION = {"kernels_unfused": 57, "kernels_fused": 23, "dram_bytes_unfused": 41_200_000,
          "dram_bytes_fused": 12_900_000, "split_back": 1, "refused": 0,
          "groups": [{"ops": ["MatMul", "Add", "Relu"], "nodes": [0, 1, 2], "level": "registers", "kept": True,
                      "split_by": "", "predicted_fused_us": 30.0, "predicted_unfused_us": 45.0,
                      "measured_fused_us": 31.0, "measured_unfused_us": 50.0},
                     {"ops": ["Transpose", "MatMul"], "nodes": [3, 4], "level": "registers", "kept": False,
                      "split_by": "measured", "predicted_fused_us": 12.0, "predicted_unfused_us": 13.0,
                      "measured_fused_us": 15.0, "measured_unfused_us": 12.0}]}


def _with_fusion(app, artifact_id: str, fusion: object) -> None:
    with transaction(app.state.sessions) as s:
        artifact = s.get(Artifact, artifact_id)
        artifact.report = {**artifact.report, "fusion": fusion}


def test_job_page_shows_the_fusion_table(alice, seeded, dashboard_app):
    _with_fusion(dashboard_app, seeded.artifacts["alice"], FUSION)
    html = alice.get(f"/jobs/{seeded.jobs['alice']}").text
    assert "Kernels 57 → 23" in html and "41.2 MB → 12.9 MB" in html
    table = html[html.index('id="job-fusion"'):]
    table = table[:table.index("</table>")]
    assert table.count("<tr>") == 1 + 2
    assert "MatMul → Add → Relu" in table and "kept" in table and "split back (measured)" in table


def test_job_page_shows_the_split_k_verdicts(alice, seeded, dashboard_app):
    with transaction(dashboard_app.state.sessions) as s:
        artifact = s.get(Artifact, seeded.artifacts["alice"])
        artifact.report = {**artifact.report, "fusion": FUSION, "split_k": [
            {"node": 3, "ops": ["Conv", "Relu"], "slices": 8, "split_us": 12.5, "whole_us": 40.0, "kept": "split",
             "by": "timed"},
            {"node": 9, "slices": 2, "split_us": None, "whole_us": None, "kept": "whole", "by": "cache"},
            "not a verdict"]}
    html = alice.get(f"/jobs/{seeded.jobs['alice']}").text
    table = html[html.index('id="job-split-k"'):]
    table = table[:table.index("</table>")]
    assert table.count("<tr>") == 1 + 2
    assert "split (timed)" in table and "whole (cache)" in table and "Conv → Relu" in table


def test_job_page_without_or_with_a_broken_fusion_report_has_no_table(alice, seeded, dashboard_app):
    assert 'id="fusion-summary"' not in alice.get(f"/jobs/{seeded.jobs['alice']}").text
    _with_fusion(dashboard_app, seeded.artifacts["alice"], {"kernels_unfused": "many"})
    html = alice.get(f"/jobs/{seeded.jobs['alice']}").text
    assert html.count("<h2>Kernels</h2>") == 1 and 'id="fusion-summary"' not in html
