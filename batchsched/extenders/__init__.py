"""HTTP scheduler extenders, both ways: batchsched calling kube-scheduler-style extenders
(protocol.py, settings.py, client.py, fetch.py) and serving as one (server.py)."""
