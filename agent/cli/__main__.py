"""`python -m ooda.agent.cli`: the command line in this process, never a daemon."""

from ooda.agent.cli.app import main
from ooda.agent.startup.entry import exit_now, run_here

exit_now(run_here(main))
