# Writes OUTPUT, a C++ source defining placelab::learned::pretrained_gdp_text() with the contents of
# INPUT (the committed pre-trained GDP checkpoint) as raw string literals in chunks (compilers cap the
# length of one literal); an absent INPUT gives an empty text. Run with cmake -P at build time.
if(EXISTS "${INPUT}")
  file(READ "${INPUT}" text)
else()
  set(text "")
endif()
string(LENGTH "${text}" length)
set(chunk_chars 16000)
set(body "")
set(offset 0)
while(offset LESS length)
  string(SUBSTRING "${text}" ${offset} ${chunk_chars} chunk)
  string(APPEND body "    R\"gdp_ckpt(${chunk})gdp_ckpt\"\n")
  math(EXPR offset "${offset} + ${chunk_chars}")
endwhile()
if(body STREQUAL "")
  set(body "    \"\"\n")
endif()
file(WRITE "${OUTPUT}.tmp"
"// Generated from policy/learned/pretrained/gdp.json by policy/learned/pretrained/embed.cmake: do not edit.
#include <string_view>

namespace placelab::learned {

std::string_view pretrained_gdp_text() {
  static constexpr char kText[] =
${body}  ;
  return {kText, sizeof(kText) - 1};
}

}  // namespace placelab::learned
")
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUTPUT}.tmp")
