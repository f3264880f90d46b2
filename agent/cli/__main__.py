"""`python -m ooda.agent.cli`: the command line in this process, never a daemon (and without
start-up's head start: no prestarted sandbox, no `ooda daemon` commands)."""

from ooda.agent.cli.app import main
from ooda.agent.support.exits import exit_now, run_here

exit_now(run_here(main, defer=True))
