// The source of the targets that build the libraries' two precompiled headers
// (paratune_precompile in cmake/Precompiled.cmake): the header is their content.
