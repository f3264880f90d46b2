"""What the model is shown of a repository: an index of its Python code, a ranking of files
and units from the task's text (and, where a fast model is configured, from its votes), and a
presentation fitted to a token budget (agent/context/README.md).
"""

from ooda.agent.context.choose import choose_context
from ooda.agent.context.present import Context, ShownFile

__all__ = ["Context", "ShownFile", "choose_context"]
