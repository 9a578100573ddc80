"""Every block of clients/python/README.md, run as it is written: the
Python ones as scripts against the test dlockd ($DLOCKD_URL; the TLS one
against a dlockd with mutual TLS, with the certificates in ./tls), the
shell one in a scratch folder holding clients/python."""
import os
import re
import shutil
import subprocess
import unittest

from . import support


def blocks(lang):
    with open(os.path.join(support.PYROOT, "README.md")) as f:
        text = f.read()
    return re.findall(r"^```" + lang + r"\n(.*?)^```", text, re.S | re.M)


def setUpModule():
    global REDIS, SRV
    REDIS, SRV = support.shared()


class TestReadme(unittest.TestCase):
    def run_block(self, code, cwd, url, **env):
        p = subprocess.run([support.PYTHON, "-c", code], cwd=cwd, capture_output=True, text=True,
                           timeout=60, env=support.python_env(DLOCKD_URL=url, **env))
        self.assertEqual(p.returncode, 0, f"{code}\n--- stdout\n{p.stdout}--- stderr\n{p.stderr}")
        return p.stdout

    def test_python_blocks(self):
        found = blocks("python")
        self.assertGreaterEqual(len(found), 8)
        tls = [b for b in found if "tls/ca.pem" in b]
        outs = [self.run_block(b, support.TMP, SRV.url) for b in found if b not in tls]
        self.assertIn("step 2", outs[0])
        self.assertIn("stopped: not_held", outs[1])
        self.assertIn("cancelled on loss", outs[2])
        self.assertIn("leads with token", outs[3])
        self.assertEqual(outs[4].count("deploys with permit"), 4)
        self.assertIn("the limit in force is 2", outs[4])
        self.assertIn("session ended: all three released", outs[5])
        self.assertEqual(len(outs[5].splitlines()), 4)     # three holdings listed
        self.assertIn("in the way: ledger - held: 0", outs[6])
        self.assertIn("granted 2 locks", outs[6])
        p = support.pki()
        srv = support.Dlockd(REDIS, "--tls-cert", p["server.pem"], "--tls-key", p["server.key"],
                             "--tls-client-ca", p["ca.pem"])
        self.addCleanup(srv.stop)
        os.makedirs(os.path.join(support.TMP, "readme"), exist_ok=True)
        link = os.path.join(support.TMP, "readme", "tls")
        if not os.path.exists(link):
            os.symlink(os.path.dirname(p["ca.pem"]), link)
        self.assertEqual(len(tls), 1)
        out = self.run_block(tls[0], os.path.dirname(link), srv.url.replace("127.0.0.1", "localhost"))
        self.assertIn("written under token", out)

    def test_sessions_guide_block_is_run_here(self):
        # docs/guides/sessions.md shows this client's session block marked
        # "not-run: the py client's readme test runs the same code": keep it so.
        with open(os.path.join(support.REPO, "docs", "guides", "sessions.md")) as f:
            guide = f.read().split("\n### Python\n", 1)[1]
        (code,) = re.findall(r"^```python\n(.*?)^```", re.split(r"\n##+ ", guide)[0], re.S | re.M)
        self.assertIn(code, blocks("python"))

    def test_shell_block(self):
        (sh,) = blocks("sh")
        if any(subprocess.run([support.PYTHON, *args], capture_output=True).returncode
               for args in (["-m", "pip", "--version"], ["-c", "import setuptools"],
                            ["-c", "import wheel"])):
            self.skipTest("pip, setuptools or wheel is not installed: the pip line cannot run")
        d = os.path.join(support.TMP, "install")
        os.makedirs(os.path.join(d, "clients"))
        shutil.copytree(support.PYROOT, os.path.join(d, "clients", "python"),
                        ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
        env = dict(os.environ)
        env.pop("PYTHONPATH", None)
        p = subprocess.run(["sh", "-ec", sh], cwd=d, capture_output=True, text=True, timeout=120,
                           env=env)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("0.1.0", p.stdout)
        self.assertIn("<dlockd.Client http://127.0.0.1:8080>", p.stdout)


if __name__ == "__main__":
    unittest.main()
