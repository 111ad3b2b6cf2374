"""Lab agents: run the recipe sets of some labs on a host beside them, over HTTP only.

``labq agent`` (:mod:`labq.agent.process`) claims started sets of its labs from
the server, runs a supervisor process for each (:mod:`labq.agent.supervisor`),
and forwards what the supervisor writes to its set directory (:mod:`labq.agent.spool`)
to the server: numbered reports, log files by offset (:mod:`labq.agent.uploader`),
and the end. The agent never holds the database URL; docs/operations.md (Lab
agents) and the protocol note describe the calls.
"""
