# Reliability: fault injection, non-finite steps, spike detection, and the
# end-to-end failure tests of tests/reliability.sh (dead, stopped and stuck
# ranks; crashes during checkpoint saves; determinism).
zeroc_test(NAME test_reliability_fault SOURCES test_reliability_fault.c LABELS unit)
zeroc_test(NAME test_reliability_spike SOURCES test_reliability_spike.c LABELS unit)
zeroc_test(NAME test_reliability_numeric SOURCES test_reliability_numeric.c NP 1 4 LABELS mpi)

# zeroc train under injected faults, end to end (tests/reliability.sh). Label `fault`
# (with the preemption tests below): CI's sanitizer pass leaves them out (scripts/test).
string(REPLACE ";" " " _rel_mpirun_flags "${ZEROC_MPIRUN_FLAGS}")
foreach(t dead_rank stopped_rank stuck_rank save_crash_loop nan_skip nan_stop spike_report determinism
          slow_finish)
  add_test(NAME reliability_${t}
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/reliability.sh $<TARGET_FILE:zeroc_cli> ${ZEROC_MPIEXEC}
            "${_rel_mpirun_flags}" ${t})
  set_tests_properties(reliability_${t} PROPERTIES LABELS "mpi;fault" TIMEOUT 300 PROCESSORS 2)
endforeach()
# The same timeouts and lost-rank reports through the staged comm (ZEROC_COMM=staged:
# collectives on the staging workers, their failures returned by the stream's next wait).
foreach(t dead_rank stuck_rank)
  add_test(NAME reliability_${t}_staged
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/reliability.sh $<TARGET_FILE:zeroc_cli> ${ZEROC_MPIEXEC}
            "${_rel_mpirun_flags}" ${t})
  set_tests_properties(reliability_${t}_staged PROPERTIES LABELS "mpi;fault" TIMEOUT 300 PROCESSORS 2
    ENVIRONMENT "ZEROC_COMM=staged")
endforeach()

# Preemption (tests/preempt.sh): SIGTERM, SIGINT or SIGUSR1 stop the job at a
# step boundary with a checkpoint, one line and exit 75; resumed runs are bitwise.
foreach(t term_rank usr1_mpirun int_nosave second_signal save_limit)
  add_test(NAME preempt_${t}
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/preempt.sh $<TARGET_FILE:zeroc_cli> ${ZEROC_MPIEXEC}
            "${_rel_mpirun_flags}" ${t})
  set_tests_properties(preempt_${t} PROPERTIES LABELS "mpi;fault" TIMEOUT 300 PROCESSORS 2)
endforeach()

# Hostile input (tests/hostile.sh): one CTest entry per probe group,
# tests/hostile/GROUP.sh; each probe must end in time with the expected exit
# status and a message naming what is wrong.
file(GLOB _hostile_groups CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/hostile/*.sh)
foreach(g ${_hostile_groups})
  get_filename_component(_g ${g} NAME_WE)
  add_test(NAME hostile_${_g}
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/hostile.sh $<TARGET_FILE:zeroc_cli> ${ZEROC_MPIEXEC}
            "${_rel_mpirun_flags}" ${_g})
  set_tests_properties(hostile_${_g} PROPERTIES LABELS "mpi;hostile" TIMEOUT 300 PROCESSORS 2)
endforeach()

# Failures across nodes (tests/multinode.sh): two hosts made of network
# namespaces with their own hostnames, Open MPI over TCP on a veth pair,
# launched with a hostfile and an rsh agent; needs root (skipped otherwise).
add_test(NAME multinode
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/multinode.sh $<TARGET_FILE:zeroc_cli> ${ZEROC_MPIEXEC}
          "${_rel_mpirun_flags}")
# one processor: its 63 s are mostly sleeps and sockets (every step sleeps 0.3 s), so
# another test runs beside it
set_tests_properties(multinode PROPERTIES LABELS "mpi;multinode" TIMEOUT 400 PROCESSORS 1
                     SKIP_RETURN_CODE 77)

# Under a real Slurm (tests/slurm.sh): munged, slurmctld and slurmd started on this
# machine, `srun -n 4 --mpi=pmix zeroc train`, and an sbatch job preempted twice
# (scancel --signal=TERM, then USR1 to its script) that is requeued and resumes to the
# end bitwise. Label `slurm`: left out of CI's sanitizer pass (scripts/test). Skipped
# (77) without slurmctld, slurmd or munged, or without root.
add_test(NAME slurm COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/slurm.sh $<TARGET_FILE:zeroc_cli>)
# one processor: a third of its time is Slurm's requeue delays, so another test runs beside
set_tests_properties(slurm PROPERTIES LABELS "mpi;slurm" TIMEOUT 300 PROCESSORS 1
                     SKIP_RETURN_CODE 77)
