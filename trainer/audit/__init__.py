"""`rlvr audit`: what a reward pays for, before a run spends compute on it.

    probes.py       the classes: degenerate, master keys, hedges and sprays, look-alikes, judge injection
    code_probes.py  the code classes: exits, objects equal to everything, reading or special-casing the tests,
                    printing the expected output, trivial programs
    honest.py       honest positives: the gold as a careful human writes it, for the false-negative rate
    score.py        the reward built and called as `rlvr train` builds and calls it (trainer/env_config.py,
                    trainer/experience/rewards.py), so what the audit reports is what training pays
    report.py       per-class table, the gate (`audit.max_accept`, `audit.max_false_negative`), JSON + markdown
    run.py          the command: rows -> probes -> scores -> report -> exit status
"""
