# Man pages written from the programs' own help, so that they always match the command line
# (script mode, run by the build after fp8rl and fp8rl-studio are linked):
#   cmake -DFP8RL=bin/fp8rl [-DSTUDIO=bin/fp8rl-studio] -DVERSION=0.1.0 -DOUT_DIR=share/man/man1
#         -P ManPages.cmake
# fp8rl.1: `fp8rl --help`, then one section per command from `fp8rl COMMAND --help` (the
# commands are the words listed under "commands:" in the usage). fp8rl-studio.1: its --help.
# Each page is written gzip-compressed (PAGE.1.gz), as Debian installs them.

# Text as roff that prints it verbatim: backslashes escaped, lines that would start a request
# guarded, inside a no-fill block.
function(roff_verbatim text out_var)
  string(REPLACE "\\" "\\e" text "${text}")
  string(REGEX REPLACE "(^|\n)([.'])" "\\1\\\\&\\2" text "${text}")
  string(REGEX REPLACE "\n+$" "" text "${text}")
  set(${out_var} ".nf\n${text}\n.fi\n" PARENT_SCOPE)
endfunction()

function(run_help out_var)
  execute_process(COMMAND ${ARGN} OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    string(REPLACE ";" " " cmd "${ARGN}")
    message(FATAL_ERROR "man pages: `${cmd}` failed (${rc}): ${err}")
  endif()
  set(${out_var} "${out}" PARENT_SCOPE)
endfunction()

function(write_page name page)
  set(plain "${OUT_DIR}/${name}.1")
  file(WRITE "${plain}" "${page}")
  file(ARCHIVE_CREATE OUTPUT "${plain}.gz" PATHS "${plain}" FORMAT raw COMPRESSION GZip MTIME 0)
  file(REMOVE "${plain}")
endfunction()

file(MAKE_DIRECTORY "${OUT_DIR}")

run_help(usage "${FP8RL}" --help)
roff_verbatim("${usage}" usage_roff)
string(REGEX REPLACE ".*\ncommands:\n(.*)" "\\1" listed "${usage}")
string(REGEX MATCHALL "\n  [a-z]+" words "\n${listed}")
set(commands "")
foreach(w IN LISTS words)
  string(STRIP "${w}" w)
  list(APPEND commands "${w}")
endforeach()
list(REMOVE_DUPLICATES commands)
if(NOT commands)
  message(FATAL_ERROR "man pages: no commands found in `fp8rl --help`")
endif()
set(sections "")
foreach(c IN LISTS commands)
  run_help(help "${FP8RL}" ${c} --help)
  roff_verbatim("${help}" help_roff)
  string(APPEND sections ".SS ${c}\n${help_roff}")
endforeach()

write_page(fp8rl ".TH FP8RL 1 \"\" \"fp8rl ${VERSION}\" \"User Commands\"
.SH NAME
fp8rl \\- end-to-end FP8 reinforcement learning (GRPO) of language models
.SH SYNOPSIS
.B fp8rl
.RB [ \\-\\-debug ]
.I command
.RI [ options ]
.SH DESCRIPTION
Trains, serves and inspects GRPO runs whose linear layers compute in block-wise FP8 (E4M3),
on the CPU reference backend or, where a GPU and the CUDA backend module are present, on CUDA.
Runs are recorded in a SQLite run database that
.BR fp8rl-studio (1)
shows.
.PP
${usage_roff}.SH COMMANDS
${sections}.SH SEE ALSO
.BR fp8rl-studio (1)
")

if(STUDIO)
  # The studio's --help needs no display (it starts on Qt's minimal platform).
  run_help(studio_help "${STUDIO}" --help)
  # Qt names the program by the path it was started from.
  string(REPLACE "${STUDIO}" "fp8rl-studio" studio_help "${studio_help}")
  roff_verbatim("${studio_help}" studio_roff)
  write_page(fp8rl-studio ".TH FP8RL-STUDIO 1 \"\" \"fp8rl ${VERSION}\" \"User Commands\"
.SH NAME
fp8rl-studio \\- launch, watch, steer and compare FP8 reinforcement-learning runs
.SH SYNOPSIS
.B fp8rl-studio
.RI [ options ]
.SH DESCRIPTION
The desktop studio of FP8 RL Studio. It launches runs as
.B fp8rl worker
processes (the
.BR fp8rl (1)
installed beside it), shows them live from their telemetry and the run database, pauses and
resumes them, switches any linear layer between BF16 and FP8 while a run goes on, and compares
runs side by side. Closing the studio does not stop the runs.
.PP
${studio_roff}.SH SEE ALSO
.BR fp8rl (1)
")
endif()
