"""The watchdog's held-out labelled set: written with the tuning set (watchdog_labelled.py) but
never run while the rules were tuned; its first result is the one reported (notes/37.md).
Other APIs and shapes for the same classes, and safe code that looks like them."""

from __future__ import annotations

from watchdog_labelled import FORMATS, Change, _swap

ORDERS = '''\
import psycopg2


class OrderStore:
    def __init__(self, dsn):
        self.conn = psycopg2.connect(dsn)

    def by_customer(self, customer_id):
        with self.conn.cursor() as cur:
            cur.execute("SELECT * FROM orders WHERE customer_id = %s", (customer_id,))
            return cur.fetchall()

    def cancel(self, order_id):
        with self.conn.cursor() as cur:
            cur.execute("UPDATE orders SET status = 'cancelled' WHERE id = %s", (order_id,))
        self.conn.commit()
'''

TOOLS = '''\
import subprocess
from pathlib import Path


def archive(folder: Path, target: Path) -> None:
    subprocess.run(["tar", "-czf", str(target), "-C", str(folder), "."], check=True)


def disk_usage(folder: Path) -> str:
    out = subprocess.run(["du", "-sh", str(folder)], capture_output=True, text=True, check=True)
    return out.stdout.split()[0]
'''

SESSION = '''\
import base64
import json


def encode_session(data: dict) -> str:
    return base64.b64encode(json.dumps(data).encode()).decode()


def decode_session(token: str) -> dict:
    return json.loads(base64.b64decode(token))
'''

PIPELINE = '''\
"""Load a pipeline description."""

from pathlib import Path

import yaml


def read_pipeline(path: Path) -> dict:
    return yaml.safe_load(path.read_text())
'''

WEBHOOK = '''\
import httpx


async def notify(url: str, payload: dict) -> int:
    async with httpx.AsyncClient(timeout=5) as client:
        response = await client.post(url, json=payload)
    return response.status_code
'''

FILTERS = '''\
"""Filters users type in the search box: `age > 30 and city == "Paris"`."""

OPERATORS = {">": lambda a, b: a > b, "<": lambda a, b: a < b, "==": lambda a, b: a == b}


def matches(record, field, op, value):
    return OPERATORS[op](record[field], value)
'''

MAILER = '''\
import os
import smtplib


def send(to, subject, body):
    with smtplib.SMTP_SSL(os.environ["SMTP_HOST"]) as smtp:
        smtp.login(os.environ["SMTP_USER"], os.environ["SMTP_PASSWORD"])
        smtp.sendmail(os.environ["SMTP_USER"], [to], f"Subject: {subject}\\n\\n{body}")
'''

TEMPLATES = '''\
import jinja2


def render(template_dir, name, **context):
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(template_dir),
        autoescape=jinja2.select_autoescape(),
    )
    return env.get_template(name).render(**context)
'''


HELD_OUT: tuple[Change, ...] = (
    Change("h-sql-percent", "orders.py", ORDERS,
           _swap(ORDERS, 'cur.execute("SELECT * FROM orders WHERE customer_id = %s", '
                 '(customer_id,))',
                 'cur.execute("SELECT * FROM orders WHERE customer_id = %s" % customer_id)'),
           "S608", 'cur.execute("SELECT * FROM orders WHERE customer_id = %s" % customer_id)'),
    Change("h-sql-format-multiline", "orders.py", ORDERS,
           _swap(ORDERS, '''            cur.execute("UPDATE orders SET status = 'cancelled' WHERE id = %s", (order_id,))''',
                 '''            sql = "UPDATE orders SET status = '{}' WHERE id = {}".format(
                "cancelled", order_id
            )
            cur.execute(sql)'''),
           "S608", '''sql = "UPDATE orders SET status = '{}' WHERE id = {}".format('''),
    Change("h-sql-placeholders-safe", "orders.py", ORDERS,
           ORDERS + '''
    def search(self, term, limit=20):
        with self.conn.cursor() as cur:
            cur.execute(
                "SELECT id, total FROM orders WHERE note ILIKE %s LIMIT %s",
                (f"%{term}%", limit),
            )
            return cur.fetchall()
''', None),
    Change("h-shell-popen", "tools.py", TOOLS,
           _swap(TOOLS, '    subprocess.run(["tar", "-czf", str(target), "-C", str(folder), "."], '
                 'check=True)',
                 '    proc = subprocess.Popen(f"tar -czf {target} -C {folder} .", shell = True)\n'
                 '    proc.wait()'),
           "S602", 'proc = subprocess.Popen(f"tar -czf {target} -C {folder} .", shell = True)'),
    Change("h-os-popen", "tools.py", TOOLS,
           _swap(_swap(TOOLS, "import subprocess\n", "import os\nimport subprocess\n"), '''    out = subprocess.run(["du", "-sh", str(folder)], capture_output=True, text=True, check=True)
    return out.stdout.split()[0]''', '''    return os.popen(f"du -sh {folder}").read().split()[0]'''),
           "S605", 'return os.popen(f"du -sh {folder}").read().split()[0]'),
    Change("h-shell-false-safe", "tools.py", TOOLS,
           TOOLS + '''

def checksum(path: Path) -> str:
    """sha256 of `path` (runs `sha256sum`; never through a shell: shell=True would let
    a file name run commands)."""
    out = subprocess.run(["sha256sum", str(path)], capture_output=True, text=True,
                         check=True, shell=False)
    return out.stdout.split()[0]
''', None),
    Change("h-pickle-session", "session.py", SESSION,
           _swap(_swap(SESSION, "import json\n", "import json\nimport pickle\n"),
                 "    return json.loads(base64.b64decode(token))",
                 "    raw = base64.b64decode(token)\n    return pickle.loads(raw)"),
           "S301", "return pickle.loads(raw)"),
    Change("h-json-session-safe", "session.py", SESSION,
           _swap(SESSION, "    return json.loads(base64.b64decode(token))",
                 "    data = json.loads(base64.b64decode(token))\n"
                 "    if not isinstance(data, dict):\n"
                 "        raise ValueError(\"a session is a JSON object\")\n"
                 "    return data"), None),
    Change("h-yaml-unsafe-loader", "pipeline.py", PIPELINE,
           _swap(PIPELINE, "    return yaml.safe_load(path.read_text())",
                 "    with path.open() as stream:\n"
                 "        return yaml.load(stream, Loader=yaml.UnsafeLoader)"),
           "S506", "return yaml.load(stream, Loader=yaml.UnsafeLoader)"),
    Change("h-yaml-csafe-safe", "pipeline.py", PIPELINE,
           _swap(PIPELINE, "    return yaml.safe_load(path.read_text())",
                 "    loader = getattr(yaml, \"CSafeLoader\", yaml.SafeLoader)\n"
                 "    return yaml.load(path.read_text(), Loader=yaml.CSafeLoader)"), None),
    Change("h-httpx-verify", "webhook.py", WEBHOOK,
           _swap(WEBHOOK, "async with httpx.AsyncClient(timeout=5) as client:",
                 "async with httpx.AsyncClient(timeout=5, verify=False) as client:"),
           "S501", "async with httpx.AsyncClient(timeout=5, verify=False) as client:"),
    Change("h-eval-filter", "filters.py", FILTERS,
           FILTERS + '''

def compile_filter(expression):
    """Turn the user's filter into a predicate."""
    return lambda record: bool(eval(expression, {}, dict(record)))
''', "S307", "return lambda record: bool(eval(expression, {}, dict(record)))"),
    Change("h-eval-word-safe", "filters.py", FILTERS,
           FILTERS + '''

def evaluate_all(records, predicate):
    """Keep the records the predicate accepts (we never eval() the user's text)."""
    evaluated = [r for r in records if predicate(r)]
    return evaluated
''', None),
    Change("h-aws-keyid-constant", "mailer.py", MAILER,
           MAILER + '''

SES_ACCESS_KEY = "AKIAZ4RQ7WLM3NBX2TYU"
SES_REGION = "eu-central-1"
''', "SECRET", 'SES_ACCESS_KEY = "AKIAZ4RQ7WLM3NBX2TYU"', formats=FORMATS[:4]),
    Change("h-smtp-password", "mailer.py", MAILER,
           _swap(MAILER, 'smtp.login(os.environ["SMTP_USER"], os.environ["SMTP_PASSWORD"])',
                 'smtp_password = "s3cr3t-SMTP-passw0rd!"\n'
                 '        smtp.login(os.environ["SMTP_USER"], smtp_password)'),
           "SECRET", 'smtp_password = "s3cr3t-SMTP-passw0rd!"'),
    Change("h-ec-private-key", "keys.py", "",
           '''"""The signing key for webhooks."""

SIGNING_KEY = """
-----BEGIN EC PRIVATE KEY-----
MHcCAQEEIBYr2P1fFq3qF3v0Y6ZGq9zS5H1b9uXc3mKf7T8q2JqKoAoGCCqGSM49
-----END EC PRIVATE KEY-----
"""
''', "SECRET", "-----BEGIN EC PRIVATE KEY-----", formats=FORMATS[:4]),
    Change("h-jinja-autoescape-off", "templates.py", TEMPLATES,
           _swap(TEMPLATES, "        autoescape=jinja2.select_autoescape(),\n",
                 "        autoescape=False,\n"),
           "S701", "autoescape=False,"),
    Change("h-slack-token", "webhook.py", WEBHOOK,
           WEBHOOK + '''

SLACK_TOKEN = "xoxb-2841937562-1938475610-Qw7Er8Ty9Ui0Op1As2Df3Gh4"
''', "SECRET", 'SLACK_TOKEN = "xoxb-2841937562-1938475610-Qw7Er8Ty9Ui0Op1As2Df3Gh4"',
           formats=FORMATS[:4]),
)


# A second held-out batch, written after the first one's result had been used to fix the
# rules (notes/37.md): new shapes, among them the two classes fixed (a parametrised query next
# to an f-string; an edit entering a multi-line call in its middle).

INGEST = '''\
"""Ingest events into the warehouse."""

import logging
import sqlite3

import requests

log = logging.getLogger(__name__)


def fetch(url, token):
    response = requests.post(
        url,
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )
    response.raise_for_status()
    return response.json()


def store(conn, events):
    conn.executemany(
        "INSERT INTO events (kind, payload) VALUES (?, ?)",
        [(e["kind"], e["payload"]) for e in events],
    )
    log.info(f"stored {len(events)} events")
'''

BUILD = '''\
import subprocess
import sys


def compile_assets(folder):
    result = subprocess.run(
        [sys.executable, "-m", "build_assets", folder],
        capture_output=True,
        text=True,
    )
    return result.returncode == 0
'''

PLUGINS = '''\
"""Plugins register themselves by name."""

REGISTRY = {}


def register(name, factory):
    REGISTRY[name] = factory


def create(name, *args):
    return REGISTRY[name](*args)
'''

SETTINGS = '''\
import os

DEBUG = os.environ.get("DEBUG") == "1"
DATABASE_URL = os.environ.get("DATABASE_URL", "sqlite:///local.db")
'''

HELD_OUT_2: tuple[Change, ...] = (
    Change("h2-sql-insert-percent", "ingest.py", INGEST,
           INGEST + '''

def store_one(conn, kind, payload):
    conn.execute("INSERT INTO events (kind, payload) VALUES ('%s', '%s')" % (kind, payload))
''', "S608", '''conn.execute("INSERT INTO events (kind, payload) VALUES ('%s', '%s')" % (kind, payload))'''),
    Change("h2-sql-log-fstring-safe", "ingest.py", INGEST,
           INGEST + '''

def purge(conn, kind):
    cur = conn.execute("DELETE FROM events WHERE kind = ?", (kind,))
    log.info(f"deleted {cur.rowcount} events of kind {kind}")
    return cur.rowcount
''', None),
    Change("h2-verify-added-mid-call", "ingest.py", INGEST,
           _swap(INGEST, '''        timeout=30,
    )''', '''        timeout=30,
        verify=False,
    )'''), "S501", "verify=False,"),
    Change("h2-shell-added-mid-call", "build.py", BUILD,
           _swap(BUILD, '''        capture_output=True,
        text=True,
    )''', '''        capture_output=True,
        text=True,
        shell=True,
    )'''), "S602", "shell=True,"),
    Change("h2-pickle-load-file", "plugins.py", PLUGINS,
           _swap(PLUGINS, '"""Plugins register themselves by name."""\n',
                 '"""Plugins register themselves by name."""\n\nimport pickle\n') + '''

def load_registry(path):
    with open(path, "rb") as fh:
        REGISTRY.update(pickle.load(fh))
''', "S301", "REGISTRY.update(pickle.load(fh))"),
    Change("h2-pickle-dumps-safe", "plugins.py", PLUGINS,
           _swap(PLUGINS, '"""Plugins register themselves by name."""\n',
                 '"""Plugins register themselves by name."""\n\nimport pickle\n') + '''

def snapshot():
    return pickle.dumps(sorted(REGISTRY))
''', None),
    Change("h2-exec-globals", "plugins.py", PLUGINS,
           PLUGINS + '''

def load_plugin_source(source):
    namespace = {"register": register}
    exec(source, namespace)
''', "S102", "exec(source, namespace)"),
    Change("h2-eval-compile", "plugins.py", PLUGINS,
           PLUGINS + '''

def create_from_spec(spec):
    factory = eval(compile(spec, "<spec>", "eval"))
    return factory()
''', "S307", 'factory = eval(compile(spec, "<spec>", "eval"))'),
    Change("h2-dataframe-eval-safe", "plugins.py", PLUGINS,
           PLUGINS + '''

def total(frame):
    return frame.eval("price * quantity").sum()
''', None),
    Change("h2-stripe-key", "settings.py", SETTINGS,
           SETTINGS + 'STRIPE_API_KEY = "sk_live_51HxQ2bLkT9mVn3Rp8Zc4Wd7Y"\n',
           "SECRET", 'STRIPE_API_KEY = "sk_live_51HxQ2bLkT9mVn3Rp8Zc4Wd7Y"', formats=FORMATS[:4]),
    Change("h2-google-key", "settings.py", SETTINGS,
           SETTINGS + 'MAPS_KEY = "AIzaSyB3x9Qk2LmN8pR4tV6wY1zC5dF7gH0jKl2"\n',
           "SECRET", 'MAPS_KEY = "AIzaSyB3x9Qk2LmN8pR4tV6wY1zC5dF7gH0jKl2"', formats=FORMATS[:4]),
    Change("h2-stripe-env-safe", "settings.py", SETTINGS,
           SETTINGS + 'STRIPE_API_KEY = os.environ["STRIPE_API_KEY"]\n'
           'STRIPE_TEST_KEY = os.environ.get("STRIPE_TEST_KEY", "sk_test_placeholder")\n',
           None, formats=FORMATS[:4]),
    Change("h2-pem-file", "certs/server.key", "",
           "-----BEGIN PRIVATE KEY-----\n"
           "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj\n"
           "-----END PRIVATE KEY-----\n",
           "SECRET", "-----BEGIN PRIVATE KEY-----",
           formats=("search_replace", "search_replace_fenced", "udiff", "whole_file")),
)
