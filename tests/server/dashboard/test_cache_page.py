"""The kernel cache page: totals, filters, sorting, key search, pagination; the kernel page."""

import re

from .dashboard_seed import CPU, GPU, key_of


def keys_on(html: str) -> list[str]:
    return re.findall(r'<tr data-key="([0-9a-f]{64})">', html)


def test_totals_and_charts(alice):
    html = alice.get("/").text
    assert re.search(r'id="total-kernels">32<', html)
    # 30 CPU kernels with 0..29 hits, 2 GPU with 5 and 0: 440 hits over 440 + 32 lookups
    assert re.search(r'id="total-hit-rate">93%<', html)
    assert "Kernels per target" in html and "<svg" in html
    assert "cpu:x86_64" in html and "cuda:sm_90" in html
    per_target = html.split('id="per-target"', 1)[1].split("</table>", 1)[0]
    assert re.search(r"cpu:x86_64</a></td>\s*<td class=\"num\">30</td><td class=\"num\">435</td>"
                     r"<td class=\"num\">94%</td>", per_target)


def test_filter_by_target_changes_the_rows(alice):
    everything = keys_on(alice.get("/").text)
    assert len(everything) == 25  # one page
    gpu = keys_on(alice.get("/", params={"target": GPU}).text)
    assert sorted(gpu) == [key_of(30), key_of(31)]
    cpu = alice.get("/", params={"target": CPU}).text
    assert key_of(30) not in keys_on(cpu) and "1\u201325 of 30" in cpu


def test_filter_by_op_measured_stale_and_key(alice):
    relu = keys_on(alice.get("/", params={"op": "relu", "target": CPU}).text)
    assert relu and all(int(k[:2], 16) % 2 == 1 for k in relu)
    unmeasured = keys_on(alice.get("/", params={"measured": "unmeasured"}).text)
    assert sorted(unmeasured) == sorted([key_of(i) for i in range(30) if i % 3 == 0] + [key_of(31)])
    measured = keys_on(alice.get("/", params={"measured": "measured", "target": GPU}).text)
    assert measured == [key_of(30)]
    stale = keys_on(alice.get("/", params={"stale": "stale"}).text)
    assert sorted(stale) == [key_of(28), key_of(29)]
    assert keys_on(alice.get("/", params={"key": key_of(7)[:6]}).text) == [key_of(7)]
    assert keys_on(alice.get("/", params={"key": "zz%"}).text) == []


def test_sorting_and_pagination(alice):
    by_hits = keys_on(alice.get("/", params={"sort": "hits", "order": "desc"}).text)
    assert by_hits[:2] == [key_of(29), key_of(28)]
    ascending = keys_on(alice.get("/", params={"sort": "hits", "order": "asc"}).text)
    assert ascending[0] in (key_of(0), key_of(31))  # both have no hits
    first = keys_on(alice.get("/", params={"sort": "predicted", "order": "asc"}).text)
    second = alice.get("/", params={"sort": "predicted", "order": "asc", "page": 2}).text
    assert first[0] == key_of(0) and len(keys_on(second)) == 7
    assert not set(first) & set(keys_on(second))
    assert 'rel="prev"' in second and "page 2 of 2" in second
    past_the_end = alice.get("/", params={"sort": "predicted", "order": "asc", "page": 99}).text
    assert keys_on(past_the_end) == keys_on(second)


def test_kernel_page_shows_source_tiles_and_the_tenants_jobs(alice, seeded):
    html = alice.get(f"/kernels/{key_of(1)}").text
    assert '<span class="tok-keyword">for</span>' in html
    assert '<span class="tok-preproc">#include &lt;stdint.h&gt;</span>' in html
    assert 'data-copy="' + key_of(1) + '"' in html
    assert "L1 (staged per step)" in html and "4 \u00d7 2" in html
    assert f'href="/jobs/{seeded.jobs["alice"]}"' in html
    # bob's job used kernel 3, not 1; and alice never sees bob's jobs
    other = alice.get(f"/kernels/{key_of(3)}").text
    assert seeded.jobs["bob"] not in other and "None of your jobs used this kernel" in other


def test_unknown_kernel_is_a_404_page(alice):
    r = alice.get("/kernels/" + "f" * 64)
    assert r.status_code == 404 and "No such kernel" in r.text


def test_pages_carry_a_strict_content_security_policy(alice):
    csp = alice.get("/").headers["content-security-policy"]
    assert "script-src 'self'" in csp and "default-src 'self'" in csp and "unsafe-inline" not in csp


def test_a_lowering_choice_shows_as_a_row_and_a_page(alice, dashboard_app):
    """The pipeline's answer to a lowering choice (compiler/pipeline.py `choose`) sits in the
    kernel cache: listed under its op pattern, its page shows what was timed."""
    from compiler.cache import KernelEntry, KernelSignature, compiler_fingerprint
    from server.db.kernel_cache import insert_kernel
    from server.db.session import transaction

    record = {"kind": "winograd", "key": "winograd x[1, 64, 56, 56] w[64, 64, 3, 3] pads[1, 1, 1, 1] bias0",
              "taken": False, "ms_without": 1.5431, "ms_with": 2.1691, "failed": {}}
    sig = KernelSignature(op_pattern="choice:winograd", shapes=record["key"], dtypes="", te_hash="cd" * 32,
                          target_fingerprint=CPU, compiler_fingerprint=compiler_fingerprint(), options="{}")
    entry = KernelEntry(sig, {}, "/* lowering choice */\n", b"", measured_us=1543.1, extras={"choice": record})
    with transaction(dashboard_app.state.sessions) as s:
        insert_kernel(s, entry)
    assert keys_on(alice.get("/", params={"op": "choice"}).text) == [entry.key]
    page = alice.get(f"/kernels/{entry.key}")
    assert page.status_code == 200 and "choice:winograd" in page.text and "lowering choice" in page.text
