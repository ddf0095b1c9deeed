# json_libs: zeroc's JSON parser against Debian's JSON libraries (docs/json.md).
# Off by default: it needs libjansson-dev, libcjson-dev and libjson-c-dev, which
# zeroc itself does not use.
option(ZEROC_BENCH_JSON_LIBS "Build bench_json_libs (needs jansson, cJSON and json-c)" OFF)
if(ZEROC_BENCH_JSON_LIBS)
  find_library(_jansson jansson)
  find_library(_cjson cjson)
  find_library(_jsonc json-c)
  if(_jansson AND _cjson AND _jsonc)
    add_executable(bench_json_libs ${CMAKE_CURRENT_SOURCE_DIR}/json_libs.c
      ${CMAKE_CURRENT_SOURCE_DIR}/json_libs_jansson.c ${CMAKE_CURRENT_SOURCE_DIR}/json_libs_cjson.c
      ${CMAKE_CURRENT_SOURCE_DIR}/json_libs_jsonc.c)
    target_link_libraries(bench_json_libs PRIVATE zeroc_internal ${_jansson} ${_cjson} ${_jsonc})
  else()
    message(WARNING "ZEROC_BENCH_JSON_LIBS: jansson, cJSON or json-c not found; bench_json_libs is not built")
  endif()
endif()
