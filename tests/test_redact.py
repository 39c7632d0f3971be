"""memcli.services.redact: every kind is caught, ordinary developer notes are left exactly as written."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

_ROOT = str(Path(__file__).resolve().parent.parent)
if _ROOT not in sys.path:  # memcli importable whether or not it is installed
    sys.path.insert(0, _ROOT)

from memcli.services.redact import KINDS, placeholder, redact  # noqa: E402

# (kind, text, the secret that must disappear)
CASES = [
    ("email", "Ping bob.smith+dev@example.co.uk about the release", "bob.smith+dev@example.co.uk"),
    ("email", "Signed-off-by: Jane Doe <jane@corp.io>", "jane@corp.io"),
    ("phone", "Call +1 (415) 555-0132 after 5pm", "555-0132"),
    ("phone", "UK office: +44 20 7946 0958", "7946 0958"),
    ("phone", "mobile +4915123456789", "4915123456789"),
    ("phone", "Support line (212) 555-0199", "555-0199"),
    ("phone", "Support line 415-555-0132 or 415.555.0133", "415-555-0132"),
    ("credit_card", "test card 4111 1111 1111 1111 exp 12/29", "4111 1111 1111 1111"),
    ("credit_card", "card 5500-0000-0000-0004", "5500-0000-0000-0004"),
    ("credit_card", "amex 378282246310005", "378282246310005"),
    ("ipv4", "The staging DB is at 10.20.30.40:5432", "10.20.30.40"),
    ("ipv4", "ssh deploy@203.0.113.7", "203.0.113.7"),
    ("aws_access_key", "AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
    ("aws_access_key", "temporary ASIAY34FZKBOKMUTVV7A creds", "ASIAY34FZKBOKMUTVV7A"),
    (
        "aws_secret",
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    ),
    ("github_token", "GH token ghp_1234567890abcdefghijABCDEFGHIJ123456", "ghp_1234567890abcdefghijABCDEFGHIJ123456"),
    ("github_token", "gho_16C7e42F292c6912E7710c838347Ae178B4a", "gho_16C7e42F292c6912E7710c838347Ae178B4a"),
    (
        "github_token",
        "fine-grained github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUV01234",
        "github_pat_11ABCDEFG0123456789",
    ),
    ("gitlab_token", "CI uses glpat-Ab3dEf6hIj9kLmN0pQrS", "glpat-Ab3dEf6hIj9kLmN0pQrS"),
    ("slack_token", "bot xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", "xoxb-123456789012"),
    ("openai_key", "OPENAI_API_KEY=sk-proj-Ab12Cd34Ef56Gh78Ij90Kl12Mn34", "sk-proj-Ab12Cd34Ef56Gh78Ij90Kl12Mn34"),
    ("openai_key", "old key sk-abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKL", "sk-abcdefghijklmnopqrst"),
    ("anthropic_key", "ANTHROPIC_API_KEY=sk-ant-api03-Ab12Cd34Ef56Gh78Ij90Kl-xyz_AA", "sk-ant-api03-Ab12Cd34Ef56"),
    ("auth_header", 'curl -H "Authorization: Bearer abc123def456ghi789jkl" https://x', "abc123def456ghi789jkl"),
    ("auth_header", "Authorization: Basic dXNlcjpwYXNzd29yZA==", "dXNlcjpwYXNzd29yZA=="),
    ("auth_header", "send Bearer 9f8e7d6c5b4a39281706f5e4d3c2b1a0 with it", "9f8e7d6c5b4a39281706f5e4d3c2b1a0"),
    (
        "private_key",
        "key:\n-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA7bq3xyzSECRETBODY\nQWERTY1234567890abcdef==\n"
        "-----END RSA PRIVATE KEY-----\nthanks",
        "SECRETBODY",
    ),
    (
        "private_key",
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n(truncated)",
        "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ",
    ),
    ("url_password", "DATABASE_URL=postgres://app:s3cr3t-P4ss@db.internal:5432/prod", "s3cr3t-P4ss"),
    ("url_password", "redis://:hunter22@cache:6379/0", "hunter22"),
    ("password", "password=hunter2", "hunter2"),
    ("password", "DB_PASSWORD: 'correct horse battery staple'", "correct horse battery staple"),
    ("password", "mysql -u root --password=Sup3r!Secret", "Sup3r!Secret"),
    ("password", "passwd: Tr0ub4dor&3", "Tr0ub4dor&3"),
    ("secret", 'secret = "my client secret value"', "my client secret value"),
    ("secret", "token=abcd1234efgh", "abcd1234efgh"),
    ("secret", '{"api_key": "zq81-PLmn-44aa"}', "zq81-PLmn-44aa"),
    ("secret", "STRIPE_SECRET_KEY=rk_live_51HxYzABCDEFG", "rk_live_51HxYzABCDEFG"),
    (
        "jwt",
        "id_token eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0."
        "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        "eyJzdWIiOiIxMjM0NTY3ODkwIn0",
    ),
]


@pytest.mark.parametrize("kind, text, secret", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_each_kind_is_redacted(kind: str, text: str, secret: str) -> None:
    out, kinds = redact(text)
    assert secret not in out, out
    assert kind in kinds
    assert placeholder(kind) in out
    assert kind in KINDS


def test_every_kind_is_covered_by_a_case() -> None:
    assert {c[0] for c in CASES} == set(KINDS)


def test_context_around_a_secret_is_kept() -> None:
    out, _ = redact("DATABASE_URL=postgres://app:s3cr3t@db.internal:5432/prod")
    assert out == "DATABASE_URL=postgres://app:[REDACTED:url_password]@db.internal:5432/prod"
    out, _ = redact('curl -H "Authorization: Bearer abc123def456ghi789jkl" https://x')
    assert out == 'curl -H "Authorization: Bearer [REDACTED:auth_header]" https://x'
    out, _ = redact("password=hunter2 and then")
    assert out == "password=[REDACTED:password] and then"
    out, _ = redact("key:\n-----BEGIN PRIVATE KEY-----\nAAAABBBBCCCCDDDD\n-----END PRIVATE KEY-----\nthanks")
    assert out == "key:\n[REDACTED:private_key]\nthanks"


def test_several_kinds_sorted_and_deduplicated() -> None:
    text = "mail a@example.com or b@example.org, server 10.0.0.1, password=hunter2, AKIAIOSFODNN7EXAMPLE"
    out, kinds = redact(text)
    assert kinds == ["aws_access_key", "email", "ipv4", "password"]
    assert out.count("[REDACTED:email]") == 2


def test_prefixed_token_in_an_assignment_is_reported_by_its_provider() -> None:
    out, kinds = redact("OPENAI_API_KEY=sk-proj-Ab12Cd34Ef56Gh78Ij90Kl12Mn34")
    assert out == "OPENAI_API_KEY=[REDACTED:openai_key]" and kinds == ["openai_key"]


def test_redaction_is_idempotent() -> None:
    text = "password=hunter2 mail a@example.com card 4111 1111 1111 1111 Authorization: Bearer abcdef123456789"
    once, kinds = redact(text)
    twice, kinds2 = redact(once)
    assert twice == once and kinds2 == []


ORDINARY = [
    "Upgrade to v1.2.3 on 2026-11-29",
    "commit 3f2a1c9d8e7b",
    "listen on port 8080",
    "see src/app/main.py:42",
    "Python 3.11.7",
    "Fixed in 9fceb02d0ae598e95dc970b74767f19372d61af8 (full SHA)",
    "request id 550e8400-e29b-41d4-a716-446655440000",
    "The deploy ran at 2026-11-29T18:00:01+01:00 and took 12:30 minutes",
    "Bind the dev server to 127.0.0.1:5000 or 0.0.0.0:8000, netmask 255.255.255.0",
    "Services use ports 3000 3001 3002 3003",
    "epoch ms 1732900000000, epoch s 1732900000",
    "pip install numpy==1.26.4 'requests>=2.31'",
    "Windows build 10.0.19041.1; release 2.4.1.7 of the agent",
    "git remote add origin git@github.com:acme/api.git",
    "clone ssh://git@github.com/acme/api and https://user@example.com/repo",
    "assets: logo@2x.png, npm i lodash@4.17.21, decorated with @pytest.fixture",
    "def login(user: str, password: str) -> Token:",
    "password = os.environ['DB_PASSWORD']; token=None; api_key=settings.API_KEY",
    "export DB_PASSWORD=$DB_PASSWORD; password: ${PASSWORD}; token=<your-token>",
    "Basic authentication is enabled; Bearer tokens expire after 1 hour",
    'curl -H "Authorization: Bearer $TOKEN" https://api.example.com',
    "The token: expires hourly; password: see the vault",
    "Set max_tokens=512 and max_token=100; pad_token is [PAD]",
    "private_key=/home/me/.ssh/id_rsa",
    "the API listens on http://localhost:8000/api/v1",
    "git diff --stat: +12 -3 lines, 4 files changed",
    "pass: the test must pass",
    "Use `api_key=None` to read OPENAI_API_KEY from the environment",
    "Set OPENAI_API_KEY=sk-... in .env",
    "Run `make test -j 8` then `docker compose up -d`; the build takes ~3.5 min",
    "Rate limit is 1000 requests per 60 s; timeout 30s; retries 3",
    "the hash is sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "docker pull nginx@sha256:0d17b565c37bcbd895e9d92315a05c1c3c9a29f762b011a10c54a66cd53c9b31",
    "Meeting moved to 14:30 on 29/11/2026 in room 4.12",
    "coverage went from 81.5% to 92.25%, p95 latency 120 ms",
    "Numbers: 1,234,567 rows in 0.42 s",
    "The user model has fields id, email, password_hash",
    "JWT tokens are signed with HS256; store them in an httpOnly cookie",
]


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_developer_text_is_unchanged(text: str) -> None:
    out, kinds = redact(text)
    assert out == text
    assert kinds == []


def test_empty_text() -> None:
    assert redact("") == ("", [])


def test_fast_on_a_megabyte() -> None:
    line = (
        "Deployed v1.2.3 to 10.0.0.5 on 2026-11-29 (commit 3f2a1c9d8e7b); mail ops@example.com, "
        "password=hunter2, see src/app/main.py:42, call +1 (415) 555-0132, port 8080.\n"
    )
    text = (line * (1_000_000 // len(line) + 1))[:1_000_000]
    small = text[: len(text) // 16]
    small_cpu = min(_cpu(redact, small) for _ in range(3))
    cpu = _cpu(redact, text)
    out, kinds = redact(text)
    assert kinds == ["email", "ipv4", "password", "phone"]
    assert "hunter2" not in out
    # by CPU against the same text's first 64 kB in this run (a busy machine moves both alike):
    # 16x the text, at most ~3x the CPU per byte; the absolute figure is bench/redact.py's
    assert cpu < 16 * 3 * small_cpu + 0.05, f"1 MB took {cpu:.2f} s CPU, 64 kB {small_cpu:.3f} s"


@pytest.mark.parametrize(
    "unit, count, tail",
    [
        ("1 ", 300_000, ""),
        ("a_", 300_000, " token"),
        ("-----BEGIN PRIVATE KEY-----\n", 20_000, ""),
        ("+1 ", 200_000, ""),
        ("password: ", 60_000, ""),
        ("a@a.", 150_000, ""),
    ],
    ids=["digits", "identifier", "begin-blocks", "plus", "keys", "at-dots"],
)
def test_pathological_input_stays_linear(unit: str, count: int, tail: str) -> None:
    """By CPU against the same input an eighth as long, in this run: quadratic work would cost 64x."""
    small_cpu = min(_cpu(redact, unit * (count // 8) + tail) for _ in range(3))
    cpu = _cpu(redact, unit * count + tail)
    assert cpu < 8 * 4 * small_cpu + 0.05, f"{cpu:.2f} s CPU, an eighth {small_cpu:.3f} s"


def _cpu(work, *args) -> float:
    """CPU seconds of this process spent in `work(*args)`."""
    start = time.process_time()
    work(*args)
    return time.process_time() - start


def test_a_four_part_version_in_a_bump_or_a_pin_is_no_address():
    # encode/httpx@978e5bbe: "Bump types-chardet from 5.0.3 to 5.0.4.2" became "... to [REDACTED:ipv4]"
    for text in ("Bump types-chardet from 5.0.3 to 5.0.4.2 (#2613)", "Updates `x` from 5.0.4.1 to 5.0.4.2",
                 "pin foo==1.2.3.4"):
        assert redact(text)[0] == text
    for text in ("update host from 10.0.0.1 to 10.0.0.2", "moved the db from 10.0.0.1 to 10.0.0.2", "host=10.1.2.3"):
        assert "10." not in redact(text)[0]


def test_a_grouped_bump_table_row_keeps_its_four_part_versions():
    # encode/uvicorn@35fedeeb: dependabot's grouped bump lists packages in a markdown table
    row = "| [types-pyyaml](https://github.com/python/typeshed) | `6.0.12.12` | `6.0.12.20240311` |"
    assert redact(row)[0] == row
    assert "10.0.0.9" not in redact("| host | `10.0.0.9` |")[0]  # a table of hosts stays redacted


def test_a_password_feature_named_in_a_changelog_is_no_password():
    # jazzband/pip-tools CHANGELOG: the backticked word is the command the fix is in
    text = "Fix replacing password to asterisks in `pip-compile` ({pr}`808`)"
    assert redact(text)[0] == text
    for secret, text in (("hunter22x", "the password is `hunter22x`"), ("Snoppy23", 'your password "Snoppy23" works'),
                         ("Adm1n!pw", 'the password for the admin account is "Adm1n!pw"')):
        assert secret not in redact(text)[0]
