/*
 * A/B of two builds of liblodestar in one process, interleaved (old, new, old, new, ...):
 * diagnostic for ADR 0010, not built by meson. Each build is dlopened RTLD_LOCAL|RTLD_DEEPBIND.
 *   mode parse: lds_index_from_payload with the checksum off (what the load adds to the read);
 *   mode table: the same, then lds_index_check_keys where the build has it (the key table and
 *               K7; an older build builds the table inside the parse);
 *   mode load:  lds_load_path with the defaults (pooled, checksum verified while reading).
 * build: gcc -O2 -Iinclude bench/ab_builds.c -o /tmp/ab_builds -ldl
 * usage: /tmp/ab_builds OLD/liblodestar.so NEW/liblodestar.so INDEX parse|table|load ITERATIONS
 */
#include "lodestar.h"
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
typedef lds_status (*parse_fn)(const void *, size_t, const lds_parse_options *, lds_index **, lds_error *);
typedef void (*free_fn)(lds_index *);
typedef void (*def_fn)(lds_parse_options *);
typedef lds_status (*check_fn)(const lds_index *, lds_error *);
typedef lds_status (*load_fn)(const char *, const void *, lds_index **, void *, lds_error *);
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e3+t.tv_nsec/1e6;}
static int cmp(const void*a,const void*b){double x=*(double*)a,y=*(double*)b;return (x>y)-(x<y);}
int main(int argc,char**argv){
  const char*path=argv[3]; const char*mode=argv[4]; int iters=atoi(argv[5]);
  FILE*f=fopen(path,"rb"); fseek(f,0,SEEK_END); long n=ftell(f); fseek(f,0,SEEK_SET);
  unsigned char*b=malloc(n); if(fread(b,1,n,f)!=(size_t)n) return 1; fclose(f);
  parse_fn P[2]; free_fn F[2]; def_fn D[2]; check_fn C[2]; load_fn L[2];
  for(int i=0;i<2;i++){void*h=dlopen(argv[1+i],RTLD_NOW|RTLD_LOCAL|RTLD_DEEPBIND); if(!h){puts(dlerror());return 1;}
    P[i]=(parse_fn)dlsym(h,"lds_index_from_payload"); F[i]=(free_fn)dlsym(h,"lds_index_free"); D[i]=(def_fn)dlsym(h,"lds_parse_options_default");
    C[i]=(check_fn)dlsym(h,"lds_index_check_keys"); L[i]=(load_fn)dlsym(h,"lds_load_path");}
  double *t[2]={malloc(iters*8),malloc(iters*8)};
  for(int it=-3;it<iters;it++) for(int i=0;i<2;i++){
    lds_index*idx; lds_error e; memset(&e,0,sizeof e); e.size=sizeof e; lds_status st;
    double t0=now();
    if(!strcmp(mode,"load")) st=L[i](path,NULL,&idx,NULL,&e);
    else { lds_parse_options o; D[i](&o); o.verify_checksum=false; st=P[i](b+64,n-64,&o,&idx,&e);
      if(st==0 && !strcmp(mode,"table") && C[i]) st=C[i](idx,&e); }
    double t1=now();
    if(st){printf("%s\n",e.message);return 1;} F[i](idx); if(it>=0)t[i][it]=t1-t0;}
  for(int i=0;i<2;i++){qsort(t[i],iters,8,cmp);printf("  %-44s median %7.3f ms  min %7.3f  max %7.3f\n",argv[1+i],t[i][iters/2],t[i][0],t[i][iters-1]);}
  printf("  %s: new/old median %.3f, min %.3f\n", mode, t[1][iters/2]/t[0][iters/2], t[1][0]/t[0][0]);
}
