/* src/build/templates.h — the files `opcore new` writes (internal). */
#ifndef OPCORE_BUILD_TEMPLATES_H
#define OPCORE_BUILD_TEMPLATES_H

/* One file: its name ("NAME" in it becomes the project's name) and text
 * ("@NAME@" in it likewise). */
typedef struct oc__template {
    const char *name;
    const char *text;
} oc__template;

/* Generated from the files in src/build/templates/ (scripts/gen_templates.sh);
 * each ends with {0, 0}. A name may hold '/': the file is in a subfolder. */
extern const oc__template oc__templates[];         /* opcore new NAME */
extern const oc__template oc__package_templates[]; /* opcore new --package NAME */

#endif /* OPCORE_BUILD_TEMPLATES_H */
