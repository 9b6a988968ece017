/* mutant.h - planted bugs for the mutation self-test. Compiled only with -DRS_MUTATION; the one
 * active bug is chosen at run time by the environment variable RS_MUTANT=<id>. */
#ifndef RESHARD_MUTANT_H
#define RESHARD_MUTANT_H

#ifdef __cplusplus
extern "C" {
#endif

int rs_mutant_id(void); /* 0 when none is active */

#ifdef RS_MUTATION
#define RS_MUTANT(n) (rs_mutant_id() == (n))
#else
#define RS_MUTANT(n) 0
#endif

#ifdef __cplusplus
}
#endif
#endif
