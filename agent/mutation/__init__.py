"""Candidates without a model: fault-localised mutation (`--model mutate`).

Pure: source text in, ranked candidate changes out (libcst reads the code; nothing here runs
it). The traced run of the tests it localises from is made in the sandbox by
verifiers/coverage; the candidate source that proposes the mutants to the loop is
agent/core/sources' mutate source.
"""
