# Turns a text file into a C array: -DIN=file -DOUT=file.c
file(READ ${IN} HEX HEX)
string(LENGTH "${HEX}" N)
math(EXPR BYTES "${N} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," BODY "${HEX}")
file(WRITE ${OUT} "#include <stddef.h>\nconst char mcp__openapi_json[] = {${BODY} 0};\nconst size_t mcp__openapi_json_len = ${BYTES};\n")
