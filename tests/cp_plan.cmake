# Context parallelism in the planner (docs/cp.md): formulas by hand and the search.
zeroc_test(NAME test_plan_cp SOURCES test_plan_cp.c LABELS unit)
