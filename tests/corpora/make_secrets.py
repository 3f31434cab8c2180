#!/usr/bin/env python3
"""Write the redaction corpora: tests/corpora/secrets.jsonl (credential
formats with fake values of the right shape, each in the context it is
usually leaked in) and tests/corpora/secretish_benign.jsonl (strings that
look secret-ish and are not: hashes, UUIDs, commit ids, base64 images,
public keys, placeholders, ids).

    python3 tests/corpora/make_secrets.py

Values come from a seeded generator, so the files are stable. No value is
a real credential. Each secret case: {"kind", "text", "secret", "expect", "why"}:
the redactor must leave no 8-character piece of `secret` in `text`. Each
benign case: {"text", "expect", "why"}: the redactor must leave it as it is.
"""
from __future__ import annotations

import base64
import hashlib
import json
import random
import struct
import uuid
import zlib
from pathlib import Path

R = random.Random(15)
LOWER = "abcdefghijklmnopqrstuvwxyz"
UPPER = LOWER.upper()
DIGITS = "0123456789"
ALNUM = LOWER + UPPER + DIGITS
HEX = "0123456789abcdef"
B64 = ALNUM + "+/"
URLSAFE = ALNUM + "-_"


def rnd(n: int, alphabet: str = ALNUM) -> str:
    return "".join(R.choice(alphabet) for _ in range(n))


def luhn_complete(prefix: str, length: int) -> str:
    digits = prefix + rnd(length - len(prefix) - 1, DIGITS)
    total = 0
    for i, d in enumerate(reversed(digits)):
        n = int(d)
        if i % 2 == 0:
            n *= 2
            n -= 9 if n > 9 else 0
        total += n
    return digits + str((10 - total % 10) % 10)


def pem(label: str, lines: int = 6) -> tuple[str, str]:
    body = "\n".join(rnd(64, B64) for _ in range(lines)) + "\n" + rnd(20, B64) + "=="
    return f"-----BEGIN {label}-----\n{body}\n-----END {label}-----", body


SECRETS: list[tuple[str, str, str, str]] = []  # (kind, text, secret, why)


def s(kind: str, template: str, secret: str, why: str) -> None:
    SECRETS.append((kind, template.replace("{S}", secret), secret, why))


# --- package registries ------------------------------------------------------
s("npm_token", "npm token created: {S}", "npm_" + rnd(36), "npm granular/automation token")
s("npm_token", "//registry.npmjs.org/:_authToken={S}\n", str(uuid.UUID(int=R.getrandbits(128))), "legacy npm token in .npmrc")
s("pypi_token", "[pypi]\n  username = __token__\n  password = {S}\n", "pypi-AgEIcHlwaS5vcmc" + rnd(120, URLSAFE), "PyPI API token in .pypirc")
s("pypi_token", "TWINE_PASSWORD={S}", "pypi-AgENdGVzdC5weXBpLm9yZw" + rnd(110, URLSAFE), "TestPyPI token")
s("rubygems_key", "export GEM_HOST_API_KEY={S}", "rubygems_" + rnd(48, HEX), "RubyGems API key")
s("nuget_key", "dotnet nuget push pkg.nupkg --api-key {S}", "oy2" + rnd(43, LOWER + DIGITS), "NuGet API key on a command line")
s("dockerhub_token", "docker login -u ci -p {S}", "dckr_pat_" + rnd(27, URLSAFE), "Docker Hub personal access token")
s("dockerhub_token", "DOCKER_TOKEN: {S}", "dckr_oat_" + rnd(32, URLSAFE), "Docker Hub organization access token")
s("package_registry_token", "composer config http-basic.repo.packagist.com token {S}", "packagist_uut_" + rnd(68, HEX), "Private Packagist token")
s("package_registry_token", "[registry]\ntoken = \"{S}\"", "cio" + rnd(32), "crates.io token in credentials.toml")
s("package_registry_token", "X-JFrog-Art-Api: {S}", "AKCp" + rnd(69), "JFrog Artifactory API key")
s("package_registry_token", "CLOJARS_PASSWORD={S}", "CLOJARS_" + rnd(60, LOWER + DIGITS), "Clojars deploy token")
# --- cloud providers ---------------------------------------------------------
s("aws_access_key_id", "AWS_ACCESS_KEY_ID={S}", "AKIA" + rnd(16, UPPER + DIGITS), "AWS access key id")
s("aws_access_key_id", "\"AccessKeyId\": \"{S}\",", "ASIA" + rnd(16, UPPER + DIGITS), "AWS temporary access key id")
s("aws_secret_access_key", "aws_secret_access_key = {S}\n", rnd(40, B64), "AWS secret access key in ~/.aws/credentials")
s("aws_secret_access_key", "\"SessionToken\": \"{S}\"", "FwoGZXIvYXdz" + rnd(300, B64), "AWS session token (STS)")
s("aws_secret_access_key", "AWS_SESSION_TOKEN={S}", "IQoJb3JpZ2luX2Vj" + rnd(400, B64), "AWS session token (newer prefix)")
s("gcp_api_key", "https://maps.googleapis.com/maps/api/geocode/json?key={S}", "AIza" + rnd(35, URLSAFE), "Google API key in a URL")
_, body = pem("PRIVATE KEY", 8)
s("private_key", '{"type": "service_account", "private_key": "-----BEGIN PRIVATE KEY-----\\n{S}\\n-----END PRIVATE KEY-----\\n"}', body.replace("\n", "\\n"), "GCP service-account JSON key")
s("google_oauth", "client_secret: {S}", "GOCSPX-" + rnd(28, URLSAFE), "Google OAuth client secret")
s("google_oauth", "Authorization: OAuth {S}", "ya29." + rnd(150, URLSAFE), "Google OAuth access token")
s("google_oauth", "refresh_token={S}", "1//0" + rnd(100, URLSAFE), "Google OAuth refresh token")
s("azure_storage_key", "DefaultEndpointsProtocol=https;AccountName=acct1;AccountKey={S};EndpointSuffix=core.windows.net", rnd(86, B64) + "==", "Azure storage connection string")
s("azure_storage_key", "https://acct1.blob.core.windows.net/c/b.txt?sv=2022-11-02&ss=b&srt=o&sp=r&se=2026-12-31&sig={S}", rnd(43, B64).replace("+", "%2B").replace("/", "%2F") + "%3D", "Azure SAS token in a URL")
s("azure_storage_key", "Endpoint=sb://ns1.servicebus.windows.net/;SharedAccessKeyName=Root;SharedAccessKey={S}", rnd(43, B64) + "=", "Azure Service Bus key")
s("azure_client_secret", "AZURE_CLIENT_SECRET={S}", rnd(3, ALNUM) + "8Q~" + rnd(34, ALNUM + "_~.-"), "Azure AD client secret")
s("digitalocean_token", "doctl auth init -t {S}", "dop_v1_" + rnd(64, HEX), "DigitalOcean personal access token")
s("digitalocean_token", "DO_OAUTH={S}", "doo_v1_" + rnd(64, HEX), "DigitalOcean OAuth token")
s("alibaba_access_key", "accessKeyId: {S}", "LTAI" + rnd(20), "Alibaba Cloud access key id")
s("cloud_platform_token", "HEROKU_API_KEY={S}", "HRKU-" + rnd(60, URLSAFE), "Heroku API key (new format)")
s("hashicorp_token", "VAULT_TOKEN={S}", "hvs." + rnd(90, URLSAFE), "HashiCorp Vault service token")
s("hashicorp_token", "credentials \"app.terraform.io\" { token = \"{S}\" }", rnd(14) + ".atlasv1." + rnd(67, URLSAFE), "Terraform Cloud token")
s("cloud_platform_token", "DATABRICKS_TOKEN={S}", "dapi" + rnd(32, HEX), "Databricks token")
s("cloud_platform_token", "DOPPLER_TOKEN={S}", "dp.pt." + rnd(43), "Doppler personal token")
s("cloud_platform_token", "PULUMI_ACCESS_TOKEN={S}", "pul-" + rnd(40, HEX), "Pulumi access token")
s("cloud_platform_token", "PLANETSCALE_SERVICE_TOKEN={S}", "pscale_tkn_" + rnd(43, URLSAFE), "PlanetScale service token")
s("cloud_platform_token", "FLY_API_TOKEN={S}", "fo1_" + rnd(43, URLSAFE), "Fly.io token")
s("cloud_platform_token", "NETLIFY_AUTH_TOKEN={S}", "nfp_" + rnd(40), "Netlify personal access token")
s("cloud_platform_token", "RENDER_API_KEY={S}", "rnd_" + rnd(32), "Render API key")
s("cloud_platform_token", "SUPABASE_ACCESS_TOKEN={S}", "sbp_" + rnd(40, HEX), "Supabase access token")
s("cloud_platform_token", "contentful login --management-token {S}", "CFPAT-" + rnd(43, URLSAFE), "Contentful management token")
s("observability_token", "GRAFANA_TOKEN={S}", "glsa_" + rnd(32) + "_" + rnd(8, HEX), "Grafana service-account token")
s("observability_token", "grafana cloud: {S}", "glc_" + rnd(80, B64) + "==", "Grafana Cloud token")
s("observability_token", "NEW_RELIC_API_KEY={S}", "NRAK-" + rnd(27, UPPER + DIGITS), "New Relic user key")
s("observability_token", "SENTRY_AUTH_TOKEN={S}", "sntrys_" + rnd(120, B64 + "_"), "Sentry organization token")
s("observability_token", "LINEAR_API_KEY={S}", "lin_api_" + rnd(40), "Linear API key")
# --- source forges -----------------------------------------------------------
s("github_token", "git clone https://x-access-token:{S}@github.com/o/r.git", "ghp_" + rnd(36), "GitHub classic PAT in a clone URL")
s("github_token", "GITHUB_TOKEN={S}", "github_pat_" + rnd(22) + "_" + rnd(59), "GitHub fine-grained PAT")
s("github_token", "oauth token: {S}", "gho_" + rnd(36), "GitHub OAuth token")
s("github_token", "user-to-server {S}", "ghu_" + rnd(36), "GitHub App user token")
s("github_token", "installation token {S} expires soon", "ghs_" + rnd(36), "GitHub App installation token")
s("github_token", "refresh: {S}", "ghr_" + rnd(76), "GitHub refresh token")
s("gitlab_token", "PRIVATE-TOKEN: {S}", "glpat-" + rnd(20, URLSAFE), "GitLab personal access token")
s("gitlab_token", "deploy token {S}", "gldt-" + rnd(20, URLSAFE), "GitLab deploy token")
s("gitlab_token", "runner token: {S}", "glrt-" + rnd(20, URLSAFE), "GitLab runner authentication token")
s("gitlab_token", "curl -F token={S} https://gitlab.example.com/api/v4/projects/1/trigger/pipeline", "glptt-" + rnd(40, HEX), "GitLab pipeline trigger token")
s("gitlab_token", "--registration-token {S}", "GR1348941" + rnd(20, URLSAFE), "GitLab runner registration token")
s("atlassian_token", "BITBUCKET_APP_PASSWORD={S}", "ATBB" + rnd(32), "Bitbucket app password")
s("atlassian_token", "jira api token: {S}", "ATATT3xFfGF0" + rnd(180, URLSAFE) + "=" + rnd(8, HEX.upper()), "Atlassian API token")
# --- chat and webhooks -------------------------------------------------------
s("slack_token", "SLACK_BOT_TOKEN={S}", "xoxb-" + rnd(12, DIGITS) + "-" + rnd(13, DIGITS) + "-" + rnd(24), "Slack bot token")
s("slack_token", "token: {S}", "xoxp-" + rnd(12, DIGITS) + "-" + rnd(12, DIGITS) + "-" + rnd(13, DIGITS) + "-" + rnd(32, HEX), "Slack user token")
s("slack_token", "SLACK_APP_TOKEN={S}", "xapp-1-A" + rnd(10, UPPER + DIGITS) + "-" + rnd(13, DIGITS) + "-" + rnd(64, HEX), "Slack app-level token")
s("slack_webhook", "webhook: {S}", "https://hooks.slack.com/services/T" + rnd(8, UPPER + DIGITS) + "/B" + rnd(10, UPPER + DIGITS) + "/" + rnd(24), "Slack incoming webhook URL")
s("discord_token", "DISCORD_TOKEN={S}", "M" + rnd(25, URLSAFE) + "." + rnd(6, URLSAFE) + "." + rnd(38, URLSAFE), "Discord bot token")
s("discord_webhook", "post to {S}", "https://discord.com/api/webhooks/" + rnd(18, DIGITS) + "/" + rnd(68, URLSAFE), "Discord webhook URL")
s("telegram_bot_token", "bot = Bot(\"{S}\")", rnd(10, DIGITS) + ":AA" + rnd(33, URLSAFE), "Telegram bot token")
s("teams_webhook", "TEAMS_WEBHOOK={S}", "https://contoso.webhook.office.com/webhookb2/" + str(uuid.UUID(int=R.getrandbits(128))) + "@" + str(uuid.UUID(int=R.getrandbits(128))) + "/IncomingWebhook/" + rnd(32, HEX) + "/" + str(uuid.UUID(int=R.getrandbits(128))), "Microsoft Teams incoming webhook URL")
s("teams_webhook", "flow url: {S}", "https://prod-12.westeurope.logic.azure.com:443/workflows/" + rnd(32, HEX) + "/triggers/manual/paths/invoke?api-version=2016-06-01&sp=%2Ftriggers%2Fmanual%2Frun&sv=1.0&sig=" + rnd(43, URLSAFE), "Power Automate / Logic Apps webhook URL")
s("messaging_api_key", "TWILIO_API_KEY={S}", "SK" + rnd(32, HEX), "Twilio API key")
s("messaging_api_key", "SENDGRID_API_KEY={S}", "SG." + rnd(22, URLSAFE) + "." + rnd(43, URLSAFE), "SendGrid API key")
s("messaging_api_key", "api: {S}", "key-" + rnd(32, HEX), "Mailgun private API key")
s("messaging_api_key", "mailchimp {S}", rnd(32, HEX) + "-us" + str(R.randint(1, 20)), "Mailchimp API key")
s("messaging_api_key", "BREVO_API_KEY={S}", "xkeysib-" + rnd(64, HEX) + "-" + rnd(16), "Brevo (Sendinblue) API key")
# --- payments ----------------------------------------------------------------
s("stripe_key", "Stripe.api_key = \"{S}\"", "sk_" + "live_" + rnd(99), "Stripe live secret key")
s("stripe_key", "STRIPE_RESTRICTED={S}", "rk_" + "live_" + rnd(99), "Stripe restricted key")
s("stripe_key", "STRIPE_WEBHOOK_SECRET={S}", "whsec_" + rnd(32), "Stripe webhook signing secret")
s("stripe_key", "test key {S}", "sk_" + "test_" + rnd(99), "Stripe test secret key")
s("payment_token", "SQUARE_ACCESS_TOKEN={S}", "sq0atp-" + rnd(22, URLSAFE), "Square OAuth access token")
s("payment_token", "square secret {S}", "sq0csp-" + rnd(43, URLSAFE), "Square application secret")
s("payment_token", "Authorization: {S}", "EAAA" + rnd(60, URLSAFE), "Square production access token")
s("payment_token", "BRAINTREE={S}", "access_token$production$" + rnd(16, LOWER + DIGITS) + "$" + rnd(32, HEX), "Braintree access token")
s("payment_token", "X-Shopify-Access-Token: {S}", "shpat_" + rnd(32, HEX), "Shopify admin API token")
s("payment_token", "key_secret={S}", "rzp_" + "live_" + rnd(14), "Razorpay key")
s("payment_token", "FLW_SECRET_KEY={S}", "FLWSECK-" + rnd(32, "abcdefgh0123456789") + "-X", "Flutterwave secret key")
s("facebook_token", "fb token {S}", "EAA" + rnd(180), "Facebook/Meta user access token")
# --- AI providers ------------------------------------------------------------
s("openai_key", "OPENAI_API_KEY={S}", "sk-" + rnd(48), "OpenAI legacy key")
s("openai_key", "openai.api_key = '{S}'", "sk-proj-" + rnd(156, URLSAFE), "OpenAI project key")
s("openai_key", "key: {S}", "sk-svcacct-" + rnd(140, URLSAFE), "OpenAI service-account key")
s("openai_key", "old style {S}", "sk-" + rnd(20) + "T3BlbkFJ" + rnd(20), "OpenAI key with the T3BlbkFJ marker")
s("anthropic_key", "ANTHROPIC_API_KEY={S}", "sk-ant-api03-" + rnd(93, URLSAFE) + "AA", "Anthropic API key")
s("anthropic_key", "admin key {S}", "sk-ant-admin01-" + rnd(93, URLSAFE) + "AA", "Anthropic admin key")
s("huggingface_token", "huggingface-cli login --token {S}", "hf_" + rnd(34), "Hugging Face user access token")
s("ai_api_key", "GROQ_API_KEY={S}", "gsk_" + rnd(52), "Groq API key")
s("ai_api_key", "REPLICATE_API_TOKEN={S}", "r8_" + rnd(37), "Replicate API token")
s("ai_api_key", "PERPLEXITY_API_KEY={S}", "pplx-" + rnd(48), "Perplexity API key")
s("ai_api_key", "XAI_API_KEY={S}", "xai-" + rnd(80), "xAI API key")
s("ai_api_key", "OPENROUTER_API_KEY={S}", "sk-or-v1-" + rnd(64, HEX), "OpenRouter API key")
s("ai_api_key", "LANGSMITH_API_KEY={S}", "lsv2_pt_" + rnd(32, HEX) + "_" + rnd(10, HEX), "LangSmith API key")
s("ai_api_key", "tavily: {S}", "tvly-" + rnd(32), "Tavily API key")
s("ai_api_key", "PINECONE_API_KEY={S}", "pcsk_" + rnd(6) + "_" + rnd(60), "Pinecone API key")
s("ai_api_key", "NVIDIA_API_KEY={S}", "nvapi-" + rnd(64, URLSAFE), "NVIDIA API key")
s("generic_secret", "COHERE_API_KEY={S}", rnd(40), "Cohere API key (no prefix: the key name says it)")
s("generic_secret", "mistral_api_key: \"{S}\"", rnd(32), "Mistral API key (no prefix)")
# --- databases and URLs with passwords ----------------------------------------
s("database_url", "DATABASE_URL=postgres://app:{S}@db.internal:5432/app", rnd(20, ALNUM + "-_"), "PostgreSQL URL with a password")
s("database_url", "mysql://root:{S}@127.0.0.1:3306/shop", rnd(16, ALNUM + "!*-"), "MySQL URL with a password")
s("database_url", "MONGODB_URI=mongodb+srv://svc:{S}@cluster0.ab1cd.mongodb.net/?retryWrites=true", rnd(24), "MongoDB Atlas URI")
s("database_url", "REDIS_URL=redis://:{S}@cache:6379/0", rnd(32, HEX), "Redis URL with a password and no user")
s("database_url", "amqp://guest:{S}@rabbit:5672/vhost", rnd(18), "RabbitMQ URL")
s("url_password", "proxy=https://build:{S}@proxy.corp.example:8443", rnd(14, ALNUM + "$!"), "credentials in an HTTPS URL")
s("generic_secret", "jdbc:postgresql://db:5432/app?user=app&password={S}", rnd(18), "JDBC URL with a password parameter")
s("generic_secret", "Server=tcp:sql1,1433;Database=app;User ID=sa;Password={S};Encrypt=true", rnd(20, ALNUM + "#@"), "SQL Server connection string")
# --- generic forms -------------------------------------------------------------
s("generic_secret", "SECRET_KEY={S}", rnd(50, ALNUM + "!@#%^&*(-_=+)"), "Django SECRET_KEY in .env")
s("generic_secret", "secret_key_base: {S}", rnd(128, HEX), "Rails secret_key_base")
s("generic_secret", "{\"client_id\": \"abc\", \"client_secret\": \"{S}\"}", rnd(40, URLSAFE), "OAuth client secret in JSON")
s("generic_secret", "api_key: {S}", rnd(32), "API key in YAML")
s("generic_secret", "password = \"{S}\"", rnd(14, ALNUM + "!?"), "password in a config file")
s("generic_secret", "<password>{S}</password>", rnd(16), "password in XML")
s("generic_secret", "dbPassword: '{S}'", rnd(18), "camelCase password key")
s("generic_secret", "const githubToken = \"{S}\";", rnd(40, HEX), "token in source code (40 hex)")
s("generic_secret", "client-key-data: {S}", base64.b64encode(rnd(120).encode()).decode(), "kubeconfig client key")
s("generic_secret", "{\"auths\": {\"registry.example.com\": {\"auth\": \"{S}\"}}}", base64.b64encode(("ci:" + rnd(24)).encode()).decode(), "docker config.json auth")
s("bearer_token", "curl -H 'Authorization: Bearer {S}' https://api.example.com", rnd(64, URLSAFE + "."), "bearer token in a curl command")
s("basic_auth", "Authorization: Basic {S}", base64.b64encode(("svc:" + rnd(20)).encode()).decode(), "HTTP basic credentials")
# --- keys and signed tokens ------------------------------------------------------
for label, why in [("RSA PRIVATE KEY", "PKCS#1 RSA key"), ("EC PRIVATE KEY", "SEC1 EC key"),
                   ("OPENSSH PRIVATE KEY", "OpenSSH key"), ("ENCRYPTED PRIVATE KEY", "encrypted PKCS#8 key"),
                   ("PGP PRIVATE KEY BLOCK", "PGP secret key")]:
    text, body = pem(label)
    s("private_key", "key file:\n{S}", text, why)
s("private_key", "{S}", "PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nComment: k\nPublic-Lines: 2\n" + rnd(64, B64) + "\n" + rnd(20, B64) + "\nPrivate-Lines: 1\n" + rnd(44, B64) + "\nPrivate-MAC: " + rnd(64, HEX), "PuTTY private key")
s("private_key", "age key: {S}", "AGE-SECRET-KEY-1" + rnd(58, UPPER + DIGITS), "age secret key")


def jwt(payload: dict) -> str:
    enc = lambda d: base64.urlsafe_b64encode(json.dumps(d, separators=(",", ":")).encode()).rstrip(b"=").decode()
    return f"{enc({'alg': 'HS256', 'typ': 'JWT'})}.{enc(payload)}.{rnd(43, URLSAFE)}"


s("jwt", "id_token={S}", jwt({"sub": "1234567890", "name": "Jane", "iat": 1516239022}), "JWT (HS256)")
s("jwt", "Cookie: session={S}; Path=/", jwt({"sub": "u-" + rnd(8), "exp": 1893456000, "scope": "admin"}), "JWT in a cookie")
# A second batch, written after the first measurement (it found four gaps,
# each closed as a class: tokens inside URL paths, other Authorization
# schemes, env-style *_KEY names, Mapbox secret tokens).
s("telegram_bot_token", "GET https://api.telegram.org/bot{S}/getMe", rnd(10, DIGITS) + ":AA" + rnd(33, URLSAFE), "Telegram bot token in an API URL path")
s("bearer_token", "Authorization: SSWS {S}", "00" + rnd(40, URLSAFE), "Okta API token (SSWS scheme)")
s("generic_secret", "ALGOLIA_ADMIN_KEY={S}", rnd(32, HEX), "env-style *_KEY name with a hex key")
s("cloud_platform_token", "mapbox: {S}", "sk.eyJ1Ijoi" + rnd(40, URLSAFE) + "." + rnd(22, URLSAFE), "Mapbox secret token")
s("generic_secret", "export SNYK_TOKEN={S}", str(uuid.UUID(int=R.getrandbits(128))), "Snyk token (a UUID under a token name)")
s("generic_secret", "clientSecret: '{S}'", rnd(19, ALNUM + "!#@$"), "camelCase client secret with symbols")
s("credit_card", "card: {S}", luhn_complete("4", 16), "Visa number")
s("credit_card", "pan {S}", luhn_complete("51", 16), "Mastercard number")
s("credit_card", "amex: {S}", luhn_complete("37", 15), "American Express number")

# --- benign, secret-ish ------------------------------------------------------------
BENIGN: list[tuple[str, str]] = []


def ok(text: str, why: str) -> None:
    BENIGN.append((text, why))


for i in range(12):
    data = rnd(30).encode()
    ok(f"{hashlib.md5(data).hexdigest()}  dist/app-{i}.tar.gz", "md5 checksum line")
    ok(f"sha1: {hashlib.sha1(data).hexdigest()}", "sha1 digest")
    ok(f"{hashlib.sha256(data).hexdigest()}  release-{i}.zip", "sha256sum output")
    ok(f"checksum = \"{hashlib.sha512(data).hexdigest()}\"", "sha512 in a lockfile")
for i in range(12):
    cid = hashlib.sha1(rnd(20).encode()).hexdigest()
    ok(f"commit {cid}\nAuthor: Dev <dev@example.com>", "git log header")
    ok(f"{cid[:7]} fix: handle empty input ({i})", "git log --oneline")
    ok(f"https://github.com/org/repo/commit/{cid}", "commit URL")
for i in range(14):
    u = uuid.UUID(int=R.getrandbits(128), version=4)
    ok(f"request_id={u} status=200", "request id in a log line")
    ok(f"{{\"id\": \"{u}\", \"kind\": \"Pod\"}}", "UUID in JSON")
for i in range(8):
    raw = b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + struct.pack(">IIBBBBB", 8 + i, 8, 8, 2, 0, 0, 0)
    raw += zlib.compress(bytes(R.getrandbits(8) for _ in range(200)))
    ok(f"data:image/png;base64,{base64.b64encode(raw).decode()}", "PNG image as a data URI")
    ok(base64.b64encode(raw).decode(), "bare base64 PNG bytes")
for i in range(8):
    d = hashlib.sha256(rnd(10).encode()).hexdigest()
    ok(f"image: ghcr.io/org/app@sha256:{d}", "container image digest")
    ok(f"\"integrity\": \"sha512-{base64.b64encode(hashlib.sha512(d.encode()).digest()).decode()}\"", "npm lockfile integrity")
for i in range(6):
    ok(f"arn:aws:iam::{rnd(12, DIGITS)}:role/deploy-{i}", "AWS role ARN")
    ok(f"s3://bucket-{i}/logs/2026/11/{rnd(16, HEX)}.gz", "S3 object URI")
    ok(f"/subscriptions/{uuid.UUID(int=R.getrandbits(128))}/resourceGroups/rg{i}/providers/Microsoft.Web/sites/app{i}", "Azure resource id")
for i in range(6):
    ok(f"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI{rnd(43, B64)} dev{i}@laptop", "SSH public key")
    ok(f"ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQ{rnd(300, B64)} ci@build", "SSH RSA public key")
ok("-----BEGIN PUBLIC KEY-----\n" + "\n".join(rnd(64, B64) for _ in range(4)) + "\n-----END PUBLIC KEY-----", "PEM public key")
ok("-----BEGIN CERTIFICATE-----\n" + "\n".join(rnd(64, B64) for _ in range(6)) + "\n-----END CERTIFICATE-----", "PEM certificate")
for i in range(6):
    ok(f"pk_live_{rnd(24)}", "Stripe publishable key (public by design)")
    ok(f"cus_{rnd(14)} paid invoice in_{rnd(24)}", "Stripe object ids")
for i in range(6):
    ok(f"01J{rnd(23, '0123456789ABCDEFGHJKMNPQRSTVWXYZ')}", "ULID")
    ok(f"/nix/store/{rnd(32, '0123456789abcdfghijklmnpqrsvwxyz')}-openssl-3.0.{i}", "Nix store path")
    ok(f"static/js/main.{rnd(8, HEX)}.chunk.js", "bundle file name with a content hash")
for text, why in [
    ("token_count=1532 prompt_tokens=1200 completion_tokens=332", "token usage counters"),
    ("\"tokenizer\": \"cl100k_base\"", "tokenizer name"),
    ("password_policy: strict", "a policy name, not a password"),
    ("password: ${DB_PASSWORD}", "placeholder from the environment"),
    ("api_key: <YOUR_API_KEY>", "documentation placeholder"),
    ("SECRET_KEY=changeme", "well-known placeholder"),
    ("api_key = os.environ[\"OPENAI_API_KEY\"]", "code reading a key from the environment"),
    ("const apiKey = process.env.API_KEY;", "code reading a key from the environment"),
    ("token = request.headers.get(\"Authorization\")", "code handling a token"),
    ("Authorization: Bearer <token>", "documentation of a header"),
    ("Authorization: Bearer ${TOKEN}", "shell template of a header"),
    ("Uses Bearer authentication with short-lived tokens.", "prose"),
    ("password reset email sent to j***@example.com", "log line about passwords"),
    ("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9", "a JWT header alone is not a token"),
    ("nextPageToken: CAEQAhgBIhAKC2FwcGxlLWJhbmFuYRABGAE", "pagination token"),
    ("\"next_cursor\": \"dXNlcjpVMDYxTkZUVDI=\"", "pagination cursor"),
    ("https://o4505.ingest.sentry.io/4505123 dsn public key abc123", "Sentry DSN host"),
    ("git@github.com:org/repo.git", "SSH remote"),
    ("https://user@example.com/path", "URL with a user and no password"),
    ("postgres://localhost:5432/app", "database URL without credentials"),
    ("redis://cache:6379/0", "Redis URL without credentials"),
    ("mongodb://db1,db2,db3/?replicaSet=rs0", "MongoDB URL without credentials"),
    ("Slack channel C04ABCD1234 message ts 1718034567.123459", "Slack ids"),
    ("order 1718034567123 shipped", "epoch milliseconds"),
    ("ISBN 978-3-16-148410-0", "ISBN"),
    ("phone +1 415 555 0132", "phone number"),
    ("IBAN DE89 3704 0044 0532 0130 00", "IBAN (not a card)"),
    ("MAC 00:1A:2B:3C:4D:5E, IPv6 2001:db8::8a2e:370:7334", "addresses"),
    ("version 2.14.3-rc.1+build.5821", "semver"),
    ("2026-11-22T23:25:22.123456Z", "timestamp"),
    ("color: #1a2b3c; background: #ffffff", "CSS colors"),
    ("kubectl get pod api-7d4b9c6f5-x2x9q -o yaml", "pod name with hashes"),
    ("resourceVersion: \"8301194\" uid: 3f1e9c2a-8b7d-4e6f-a5c4-1b2d3e4f5a6b", "Kubernetes metadata"),
    ("The function getSecretKeyName returns the configured name.", "identifier mentioning secrets"),
    ("secretName: tls-cert-prod", "Kubernetes secret reference"),
    ("tokenEndpoint: https://login.example.com/oauth2/v2.0/token", "OAuth endpoint URL"),
    ("access_token_ttl: 3600", "token lifetime setting"),
    ("compass: north-northwest-by-west", "a word ending in pass"),
    ("bypass_cache: true", "a key ending in pass"),
    ("PWD=/home/alice/projects/app", "working directory variable"),
    ("passwordless login enabled for 42 users", "prose"),
    ("sk-learn is the old name of scikit-learn", "prose starting with sk-"),
    ("ghp_ prefix marks classic tokens", "prose about a prefix"),
    ("AKIA prefix means long-term key", "prose about a prefix"),
    ("Use xoxb- tokens for bots", "prose about a prefix"),
    ("hf_hub_download(repo_id=\"org/model\")", "function name starting with hf_"),
    ("npm_config_cache=/tmp/.npm", "npm config variable"),
    ("dckr_pat_ tokens are scoped", "prose about a prefix"),
    ("sha256:" + hashlib.sha256(b"x").hexdigest(), "digest"),
    ("0x52908400098527886E0F7030069857D2E4169EE7", "wallet address (public)"),
    ("bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq", "bitcoin address (public)"),
    ("tx 4f3a9c2b1d8e7f60a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2", "transaction hash"),
    ("AKIAIOSFODNN7EXAMPL is 19 characters", "too short for an access key id"),
    ("card ending 4242", "last four digits"),
    ("4111 1111 1111 1112", "16 digits failing the Luhn check"),
    ("build #5821 took 00:04:13", "build log"),
    ("\"sort_key\": \"created_at#2026-11-22T10:00:00Z\"", "a DynamoDB sort key"),
    ("cache_key: user-profile-v2-9f8e7d6c5b4a3928", "a cache key"),
    ("S3_KEY=logs/2026/11/22/app.log.gz", "an object key"),
    ("pk.eyJ1IjoiYWNtZSIsImEiOiJja2x6cTBhYjAwMDAwMnBvN2ZzM2ZzZGZzIn0.Qm9ndXNTaWduYXR1cmVYeXo", "Mapbox public token (public by design)"),
    ("https://api.telegram.org/file/bot/documents/file_12.pdf", "Telegram file URL without a token"),
]:
    ok(text, why)
# Base64 of ordinary text and compressed data.
for i in range(6):
    ok(base64.b64encode(f"hello world, this is config number {i} with no secrets at all".encode()).decode(), "base64 of ordinary text")
    ok(base64.b64encode(zlib.compress(rnd(200).encode())).decode(), "base64 of compressed data")
# Long random identifiers that are not credentials.
for i in range(6):
    ok(f"trace_id={rnd(32, HEX)} span_id={rnd(16, HEX)}", "tracing ids")
    ok(f"etag: W/\"{rnd(27, URLSAFE)}\"", "HTTP ETag")
    ok(f"X-Request-Id: req_{rnd(24)}", "request id header")

# --- a third batch: values read as the client reads them ------------------------
# A security review found `key=value` secrets cut at `&`, `;` or `,`, quoted
# values with spaces missed, and tokens right after a newline or a tab. These
# cases keep them caught. Their own generator keeps the earlier values stable.
R3 = random.Random(1503)


def rnd3(n: int, alphabet: str = ALNUM) -> str:
    return "".join(R3.choice(alphabet) for _ in range(n))


s("generic_secret", "password=\"{S}\"", "ab&cd" + rnd3(12), "quoted password holding an ampersand")
s("generic_secret", "login ok, password={S} (rotated)", "Tr0ub4dor&3xyz", "unquoted password with an ampersand")
s("generic_secret", "password={S}", rnd3(6) + ";" + rnd3(6) + "," + rnd3(4), "unquoted password with ; and ,")
s("generic_secret", "diff --git a/.env b/.env\nindex 3f2a1c9..8b7d6e5 100644\n--- a/.env\n+++ b/.env\n@@ -1,2 +1,2 @@\n-DB_PASSWORD=\"changeme\"\n+DB_PASSWORD=\"{S}\"\n DB_HOST=db.internal\n",
  "hunter2 with spaces", ".env contents as git show prints them (a quoted value with spaces)")
s("generic_secret", "+DB_PASS='{S}'\n", rnd3(5) + " " + rnd3(4, DIGITS) + " " + rnd3(6) + "&", "single-quoted passphrase in a diff")
s("aws_secret_access_key", "HOSTNAME=runner-7\nAWS_ACCESS_KEY_ID=AKIA" + rnd3(16, UPPER + DIGITS) + "\nAWS_SECRET_ACCESS_KEY={S}\nPATH=/usr/local/bin:/usr/bin\n",
  rnd3(40, B64), "output of env / printenv")
s("generic_secret", "SHELL=/bin/bash\nSENTRY_AUTH_TOKEN={S}\nTERM=xterm\n", rnd3(20) + "&" + rnd3(8), "printenv line with a token holding &")
s("generic_secret", "{\"db_host\": \"db.internal\", \"db_password\": \"{S}\", \"pool\": 5}", rnd3(8) + "&" + rnd3(4) + ";" + rnd3(3), "JSON config with a password holding & and ;")
s("generic_secret", "{\"api_secret\":\"{S}\"}", rnd3(10) + "," + rnd3(10) + "&" + rnd3(4), "minified JSON config, secret with , and &")
s("generic_secret", "database:\n  host: db.internal\n  password: {S}\n  user: app\n", rnd3(7) + "&" + rnd3(5) + ",", "YAML config, unquoted password with punctuation")
s("generic_secret", "auth:\n  client_secret: \"{S}\"\n", rnd3(12) + ";" + rnd3(12), "YAML config, quoted client secret with ;")
s("github_token", "remote: token\t{S}", "ghp_" + rnd3(36), "GitHub token right after a tab")
s("aws_access_key_id", "keys:\n{S}\n", "AKIA" + rnd3(16, UPPER + DIGITS), "AWS key id right after a newline")
s("stripe_key", "live key:\n{S}", "sk_live_" + rnd3(24), "Stripe live key right after a newline")
s("slack_token", "bot\t{S}", "xoxb-" + rnd3(12, DIGITS) + "-" + rnd3(24), "Slack bot token right after a tab")
for text, why in [
    ('"password": {"type": "string", "minLength": 12}', "a JSON schema for a password field"),
    ('token: "Use the refresh token to renew the session"', "quoted prose under a token key"),
    ('"api_key": 12345678901234567890,', "a numeric id under a key name"),
    ('password: "Enter your password here"', "a form label"),
    ("password_hint: the name of your first pet", "a hint, not a password"),
    ("PASSWORD_MIN_LENGTH=12", "a password policy setting"),
    ('auth: "required for every request, see the docs"', "prose under an auth key"),
    ("secret: {name: app-credentials, key: password}", "a Kubernetes secretKeyRef in flow style"),
]:
    ok(text, why)


# A fourth batch, taken from the breadth of the public secret-scanning rule
# sets: values quoted or in JSON, .netrc, punctuation inside values, and
# provider formats the first batches had no case for. Own generator again.
R4 = random.Random(3004)


def rnd4(n: int, alphabet: str = ALNUM) -> str:
    return "".join(R4.choice(alphabet) for _ in range(n))


s("generic_secret", '{"client_id": "app-7", "client_secret": "{S}"}', rnd4(34, URLSAFE + "~."), "OAuth client secret in JSON")
s("generic_secret", 'db_password = "{S}"', rnd4(14) + "!" + rnd4(3), "quoted password assignment in a config file")
s("generic_secret", '"private_key_id": "{S}",', rnd4(40, HEX), "GCP service-account private_key_id")
s("private_key", '{"type": "service_account", "private_key": "{S}", "client_email": "svc@p.iam.gserviceaccount.com"}',
  "-----BEGIN PRIVATE KEY-----\\n" + rnd4(64, B64) + "\\n" + rnd4(64, B64) + "\\n-----END PRIVATE KEY-----\\n", "PEM key inside service-account JSON (escaped newlines)")
s("generic_secret", "machine api.heroku.com\n  login me@example.com\n  password {S}\n", rnd4(8, HEX) + "-" + rnd4(4, HEX) + "-" + rnd4(4, HEX) + "-" + rnd4(4, HEX) + "-" + rnd4(12, HEX), ".netrc password field")
s("generic_secret", "machine github.com login bot password {S}", "gho_" + rnd4(36), ".netrc on one line")
s("generic_secret", "SMTP_PASSWORD={S}", rnd4(6) + "&" + rnd4(5) + ";" + rnd4(4) + "," + rnd4(3), "env value with & ; ,")
s("generic_secret", "<add key=\"ApiSecret\" value=\"{S}\" />", rnd4(32, URLSAFE), "secret in an XML appSettings entry")
s("generic_secret", "spring.datasource.password={S}", rnd4(16) + "#" + rnd4(4), "Java properties password")
s("generic_secret", "$ mysql -u root -p{S} app", rnd4(14), "password glued to mysql -p on a command line")
s("generic_secret", "Set-Cookie: sessionid={S}; HttpOnly; Secure", rnd4(32, LOWER + DIGITS), "session cookie in a response header")
s("generic_secret", "X-API-Key: {S}", rnd4(40, URLSAFE), "API key header")
s("database_url", "DATABASE_URL=mongodb+srv://admin:{S}@cluster0.ab1cd.mongodb.net/app", rnd4(16), "MongoDB SRV URL with a password")
s("database_url", "redis://default:{S}@redis-12345.c1.us-east-1.ec2.cloud.redislabs.com:12345", rnd4(32), "Redis URL with a password")
s("database_url", "amqp://guest:{S}@rabbit.internal:5672/vhost", rnd4(10) + "%40" + rnd4(6), "AMQP URL, percent-encoded password")
s("ai_api_key", "XAI_API_KEY={S}", "xai-" + rnd4(80), "xAI API key")
s("ai_api_key", "groq: {S}", "gsk_" + rnd4(52), "Groq API key")
s("ai_api_key", "REPLICATE_API_TOKEN={S}", "r8_" + rnd4(37), "Replicate token")
s("ai_api_key", "perplexity key {S}", "pplx-" + rnd4(48), "Perplexity API key")
s("ai_api_key", "OPENAI_API_KEY={S}", "sk-proj-" + rnd4(74, URLSAFE) + "T3BlbkFJ" + rnd4(74, URLSAFE), "OpenAI project key")
s("ai_api_key", "deepseek: {S}", "sk-" + rnd4(32, LOWER + DIGITS), "DeepSeek API key (sk- and 32 hex-ish)")
s("messaging_api_key", "MAILGUN_API_KEY={S}", "key-" + rnd4(32, HEX), "Mailgun API key")
s("messaging_api_key", "sendgrid: {S}", "SG." + rnd4(22, URLSAFE) + "." + rnd4(43, URLSAFE), "SendGrid API key")
s("messaging_api_key", "TWILIO_API_KEY={S}", "SK" + rnd4(32, HEX), "Twilio API key SID")
s("messaging_api_key", "postmark token {S}", str(uuid.UUID(int=R4.getrandbits(128))), "Postmark server token (a UUID) after 'token'")
s("cloud_platform_token", "notion: {S}", "ntn_" + rnd4(11, DIGITS) + rnd4(35), "Notion integration token (ntn_)")
s("cloud_platform_token", "NOTION_TOKEN={S}", "secret_" + rnd4(43), "Notion internal integration secret (secret_)")
s("cloud_platform_token", "DOPPLER_TOKEN={S}", "dp.st.prd." + rnd4(40), "Doppler service token")
s("cloud_platform_token", "doppler personal {S}", "dp.pt." + rnd4(43), "Doppler personal token")
s("cloud_platform_token", "LINEAR_API_KEY={S}", "lin_api_" + rnd4(40), "Linear API key")
s("cloud_platform_token", "postman key {S}", "PMAK-" + rnd4(24, HEX) + "-" + rnd4(34, HEX), "Postman API key")
s("cloud_platform_token", "shopify admin {S}", "shpat_" + rnd4(32, HEX), "Shopify admin access token")
s("cloud_platform_token", "databricks token {S}", "dapi" + rnd4(32, HEX), "Databricks personal token")
s("cloud_platform_token", "GRAFANA_SA_TOKEN={S}", "glsa_" + rnd4(32) + "_" + rnd4(8, HEX), "Grafana service-account token")
s("cloud_platform_token", "grafana cloud {S}", "glc_" + rnd4(100, ALNUM), "Grafana Cloud token")
s("observability_token", "NEW_RELIC_API_KEY={S}", "NRAK-" + rnd4(27, UPPER + DIGITS), "New Relic user key")
s("cloud_platform_token", "PULUMI_ACCESS_TOKEN={S}", "pul-" + rnd4(40, HEX), "Pulumi access token")
s("cloud_platform_token", "credentials \"app.terraform.io\" { token = \"{S}\" }", rnd4(14) + ".atlasv1." + rnd4(67), "Terraform Cloud token")
s("cloud_platform_token", "fly tokens: {S}", "fo1_" + rnd4(43, URLSAFE), "Fly.io token")
s("cloud_platform_token", "PLANETSCALE_TOKEN={S}", "pscale_tkn_" + rnd4(43, URLSAFE), "PlanetScale token")
s("cloud_platform_token", "SUPABASE_ACCESS_TOKEN={S}", "sbp_" + rnd4(40, HEX), "Supabase access token")
s("cloud_platform_token", "heroku: {S}", "HRKU-" + rnd4(60, URLSAFE), "Heroku API key (new format)")
s("cloud_platform_token", "TS_AUTHKEY={S}", "tskey-auth-" + rnd4(17) + "-" + rnd4(33), "Tailscale auth key")
s("cloud_platform_token", "figma token {S}", "figd_" + rnd4(40, URLSAFE), "Figma personal access token")
s("cloud_platform_token", "contentful {S}", "CFPAT-" + rnd4(43, URLSAFE), "Contentful personal access token")
s("cloud_platform_token", "typeform: {S}", "tfp_" + rnd4(44, URLSAFE) + "_" + rnd4(14), "Typeform token")
s("cloud_platform_token", "HUBSPOT_TOKEN={S}", "pat-na1-" + str(uuid.UUID(int=R4.getrandbits(128))), "HubSpot private app token")
s("cloud_platform_token", "PREFECT_API_KEY={S}", "pnu_" + rnd4(36), "Prefect API key")
s("cloud_platform_token", "dynatrace {S}", "dt0c01." + rnd4(24, UPPER + DIGITS) + "." + rnd4(64, UPPER + DIGITS), "Dynatrace API token")
s("cloud_platform_token", "sentry: {S}", "sntrys_" + rnd4(120, URLSAFE), "Sentry org auth token")
s("cloud_platform_token", "dropbox: {S}", "sl." + rnd4(135, URLSAFE), "Dropbox short-lived token")
s("cloud_platform_token", "vault token {S}", "hvs." + rnd4(90, URLSAFE), "HashiCorp Vault service token (hvs.)")
s("github_token", "bitbucket app password {S}", "ATBB" + rnd4(32) + rnd4(8, HEX.upper()), "Bitbucket app password")
s("payment_token", "square: {S}", "EAAA" + rnd4(60, URLSAFE), "Square access token")
s("payment_token", "FLW_SECRET_KEY={S}", "FLWSECK-" + rnd4(32, HEX) + "-X", "Flutterwave secret key")
s("payment_token", "shippo {S}", "shippo_live_" + rnd4(40, HEX), "Shippo live token")
s("payment_token", "duffel: {S}", "duffel_live_" + rnd4(43, URLSAFE), "Duffel live token")
s("slack_token", "SLACK_APP_TOKEN={S}", "xapp-1-A" + rnd4(10, UPPER + DIGITS) + "-" + rnd4(13, DIGITS) + "-" + rnd4(64, HEX), "Slack app-level token")
s("discord_webhook", "webhook: {S}", "https://discordapp.com/api/webhooks/" + rnd4(18, DIGITS) + "/" + rnd4(68, URLSAFE), "Discord webhook (discordapp.com)")
s("teams_webhook", "{S}", "https://prod-12.westeurope.logic.azure.com:443/workflows/" + rnd4(32, HEX) + "/triggers/manual/paths/invoke?api-version=2016-06-01&sp=%2Ftriggers%2Fmanual%2Frun&sv=1.0&sig=" + rnd4(43, URLSAFE), "Power Automate workflow URL with its signature")
s("azure_storage_key", "https://acct.blob.core.windows.net/c/f.txt?sv=2022-11-02&ss=b&srt=o&sp=r&se=2027-01-01T00:00:00Z&sig={S}", rnd4(43, ALNUM + "%") + "%3D", "Azure SAS signature in a URL")
s("jwt", '{"access_token": "{S}", "token_type": "Bearer"}', jwt({"sub": "svc-" + rnd4(6), "aud": "api", "exp": 1893456000}), "JWT in an OAuth JSON response")
s("generic_secret", "https://hooks.example.com/cb?access_token={S}&state=1", rnd4(40, URLSAFE), "access_token in a URL query")
s("generic_secret", "GITHUB_WEBHOOK_SECRET: {S}", rnd4(20, ALNUM + "@%^"), "webhook secret with symbols in YAML")
s("private_key", "ssh key: {S}", "-----BEGIN OPENSSH PRIVATE KEY-----\n" + rnd4(70, B64) + "\n" + rnd4(70, B64) + "\n-----END OPENSSH PRIVATE KEY-----", "OpenSSH key (uneven lines)")
s("private_key", "[Interface]\nPrivateKey = {S}\nAddress = 10.0.0.2/32\n", rnd4(43, B64) + "=", "WireGuard private key")
for text, why in [
    ("commit " + rnd4(40, HEX) + "\nAuthor: Jane <jane@example.com>", "git log header"),
    ("image: ghcr.io/app/api@sha256:" + rnd4(64, HEX), "image digest"),
    ("request_id=" + str(uuid.UUID(int=R4.getrandbits(128))), "a request id UUID"),
    ('"etag": "W/\\"' + rnd4(32, HEX) + '\\""', "an HTTP ETag"),
    ("thumbnail: img_" + rnd4(24, LOWER + DIGITS) + ".png", "an image id"),
    ("notion page secret_sauce_recipes", "prose with secret_ as a word"),
    ("key-value store: keys are strings, values are bytes", "prose with key-"),
    ("use the SDK: client = Client(api_key=os.environ['API_KEY'])", "code reading a key from the environment"),
    ('"private_key_id": "<your key id>",', "a placeholder private_key_id"),
    ("password: ${DB_PASSWORD}", "an environment reference, not a value"),
    ("token_type=Bearer&expires_in=3600", "OAuth metadata without a token"),
    ("fingerprint SHA256:" + rnd4(43, B64), "an SSH key fingerprint"),
    ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI" + rnd4(43, B64) + " jane@laptop", "an SSH public key"),
    ("data:image/png;base64," + base64.b64encode(bytes(R4.getrandbits(8) for _ in range(60))).decode(), "a small inline PNG"),
    ("trace_id=" + rnd4(32, HEX) + " span_id=" + rnd4(16, HEX), "tracing ids"),
]:
    ok(text, why)


def split(key: str) -> str:
    """A fixed third set aside (held out): no detector is tuned on it."""
    return "heldout" if int(hashlib.sha256(key.encode()).hexdigest(), 16) % 3 == 0 else "tune"


def main() -> None:
    here = Path(__file__).resolve().parent
    with open(here / "secrets.jsonl", "w") as f:
        for kind, text, secret, why in SECRETS:
            f.write(json.dumps({"kind": kind, "text": text, "secret": secret, "expect": "redacted", "why": why,
                                "split": split(text)},
                               ensure_ascii=False) + "\n")
    with open(here / "secretish_benign.jsonl", "w") as f:
        for text, why in BENIGN:
            f.write(json.dumps({"text": text, "expect": "untouched", "why": why, "split": split(text)},
                               ensure_ascii=False) + "\n")
    print(f"make_secrets: {len(SECRETS)} secret formats, {len(BENIGN)} benign strings")


if __name__ == "__main__":
    main()
