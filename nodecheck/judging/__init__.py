"""Pure judging knowledge the checks share: drift across nodes, pair plans and blame, IB counter rules,
how NCCL reads its settings."""
