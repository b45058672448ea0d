"""``mqbench crosscheck``: the harness's broker rows measured against each broker's own benchmark tool."""
