# exports.cmake — the dynamic symbol table of librlx.so: the functions
# declared in include/rlx.h (a line that starts with a return type and
# names rlx_...( ), nothing else; internal rlx_ names stay hidden too.
# Written at configure time, again whenever rlx.h changes.
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/include/rlx.h)
file(STRINGS ${PROJECT_SOURCE_DIR}/include/rlx.h RLX_DECL_LINES REGEX "^[A-Za-z_][A-Za-z0-9_ *]*[ *]rlx_[a-z0-9_]+\\(")
set(RLX_NAMES "")
foreach(line IN LISTS RLX_DECL_LINES)
  string(REGEX MATCH "[ *](rlx_[a-z0-9_]+)\\(" m "${line}")
  list(APPEND RLX_NAMES ${CMAKE_MATCH_1})
endforeach()
list(REMOVE_DUPLICATES RLX_NAMES)
list(SORT RLX_NAMES)
string(ASCII 59 semicolon)  # a literal one: ";" would split a CMake list
set(RLX_EXPORTS "")
foreach(name IN LISTS RLX_NAMES)
  string(APPEND RLX_EXPORTS "    ${name}${semicolon}\n")
endforeach()
set(RLX_EXPORTS_MAP ${PROJECT_BINARY_DIR}/exports.map)
file(CONFIGURE OUTPUT ${RLX_EXPORTS_MAP} CONTENT "/* The functions of include/rlx.h (cmake/exports.cmake). */\n{\n  global:\n${RLX_EXPORTS}  local: *${semicolon}\n}${semicolon}\n" @ONLY)
if(NOT APPLE)
  set_property(TARGET rlx_shared APPEND PROPERTY LINK_DEPENDS ${RLX_EXPORTS_MAP})
  target_link_options(rlx_shared PRIVATE "LINKER:--version-script=${RLX_EXPORTS_MAP}")
endif()
