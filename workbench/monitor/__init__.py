"""Monitoring: the run against its plan, for Prometheus and Grafana.

``metrics`` names every series once (a contract: the Grafana dashboard, the alert rules, tests
and outside checks read it) and fills a registry from an estimate (the plan), from trial events
and from a training loop; ``exporter`` serves a registry over HTTP on 127.0.0.1.
"""
