# Turns a text file into a C array: -DIN=file -DOUT=file.c [-DNAME=symbol]
# defines NAME[] (the bytes and a NUL after them) and NAME_len (the bytes
# only); NAME defaults to mcp__openapi_json.
if(NOT DEFINED NAME)
  set(NAME mcp__openapi_json)
endif()
file(READ ${IN} HEX HEX)
string(LENGTH "${HEX}" N)
math(EXPR BYTES "${N} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," BODY "${HEX}")
file(WRITE ${OUT} "#include <stddef.h>\nconst char ${NAME}[] = {${BODY} 0};\nconst size_t ${NAME}_len = ${BYTES};\n")
